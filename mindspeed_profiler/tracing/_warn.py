"""Report a runtime problem once per process, and never raise it (profiling must not stop training)."""
from __future__ import annotations

import logging
import threading
import warnings

_log = logging.getLogger("mindspeed_profiler")
_seen: set[str] = set()
_lock = threading.Lock()


class ProfilerRuntimeWarning(RuntimeWarning):
    """A profiling feature failed at run time; training goes on without it."""


def warn_once(key: str, message: str) -> bool:
    """Emit `message` as a ProfilerRuntimeWarning the first time `key` is seen. Returns True if emitted."""
    with _lock:
        if key in _seen:
            return False
        _seen.add(key)
    try:
        warnings.warn(message, ProfilerRuntimeWarning, stacklevel=3)
    except Exception:  # a warnings filter set to "error" must not turn this into a crash
        _log.warning(message)
    return True


def reset_warnings() -> None:
    """Forget which warnings were emitted (tests, or a new tracer session)."""
    with _lock:
        _seen.clear()
