"""SIGTERM (how schedulers, Slurm and Ray stop a worker) ends a run as cleanly as a normal exit:
the callbacks registered by the parts that hold something open run in their order (the profilers
stop and export their open captures, order 0; the tracer flushes and closes its segment, order 10),
then the handler that was there before runs (Ray's, the user's, or the default: the process
terminates with SIGTERM as it would have). Installed once per process, from the main thread, the
first time a profiler starts or a tracer is initialised. This module imports nothing of the
package: who needs a clean end registers it."""
from __future__ import annotations

import os
import signal
import threading
from typing import Any, Callable

_installed = False
_previous: Any = None
_callbacks: list[tuple[int, Callable[[], Any]]] = []


def on_sigterm(callback: Callable[[], Any], order: int = 0) -> None:
    """Run `callback()` when SIGTERM arrives (lower `order` first; registered once)."""
    if all(cb is not callback for _, cb in _callbacks):
        _callbacks.append((order, callback))
        _callbacks.sort(key=lambda x: x[0])


def install_sigterm_handler(callback: Callable[[], Any] | None = None, order: int = 0) -> bool:
    """Register `callback` (when given) and install the handler (once; only from the main thread,
    where Python allows it). True if installed now."""
    global _installed, _previous
    if callback is not None:
        on_sigterm(callback, order)
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
    for _, callback in list(_callbacks):
        try:
            callback()
        except Exception:
            pass   # finishing the profile must never keep the process from stopping
    prev = _previous
    if callable(prev):
        prev(signum, frame)
    elif prev != signal.SIG_IGN:   # SIG_DFL (or unknown): terminate by SIGTERM, as without us
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)
