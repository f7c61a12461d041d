"""SIGTERM (how schedulers, Slurm and Ray stop a worker) ends a run as cleanly as a normal exit:
the open captures are stopped and exported (or marked), the timeline is flushed and its segment
closed, then the handler that was there before runs (Ray's, the user's, or the default: the process
terminates with SIGTERM as it would have). Installed once per process, from the main thread, the
first time a profiler starts or a tracer is initialised."""
from __future__ import annotations

import os
import signal
import threading
from typing import Any

_installed = False
_previous: Any = None


def install_sigterm_handler() -> bool:
    """Install the handler (once; only from the main thread, where Python allows it). True if installed now."""
    global _installed, _previous
    if _installed or threading.current_thread() is not threading.main_thread():
        return False
    try:
        _previous = signal.getsignal(signal.SIGTERM)
        signal.signal(signal.SIGTERM, _on_sigterm)
    except (ValueError, OSError):   # not the main interpreter / not allowed here
        return False
    _installed = True
    return True


def _on_sigterm(signum: int, frame: Any) -> None:
    try:
        from mindspeed_profiler import session
        from mindspeed_profiler.tracing.api import shutdown_tracer

        session.stop_all()
        shutdown_tracer()
    except Exception:
        pass   # finishing the profile must never keep the process from stopping
    prev = _previous
    if callable(prev):
        prev(signum, frame)
    elif prev != signal.SIG_IGN:   # SIG_DFL (or unknown): terminate by SIGTERM, as without us
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)
