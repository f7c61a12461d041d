"""The one way the runtime reports a problem: once per key per process, on the
`mindspeed_profiler` logger, never raising (profiling must not stop training).

Logging rather than `warnings`: these are operational messages from (often remote) worker
processes, and a `warnings` filter set to "error" must never turn them into a crash.
"""
from __future__ import annotations

import itertools
import logging
import threading
from typing import Any, Hashable

log = logging.getLogger("mindspeed_profiler")
_seen: set[Hashable] = set()
_lock = threading.Lock()
_scopes = itertools.count(1)


def new_scope() -> int:
    """A token for keys that should warn once per object (e.g. per profiler), not per process."""
    return next(_scopes)


def warn_once(key: Hashable, message: str, *args: Any) -> bool:
    """Log `message % args` as a warning the first time `key` is seen. Returns True if logged."""
    with _lock:
        if key in _seen:
            return False
        _seen.add(key)
    try:
        log.warning(message, *args)
    except Exception:  # a broken handler must not reach the training loop
        pass
    return True


def reset_warnings() -> None:
    """Forget which warnings were emitted (tests, or a new session)."""
    with _lock:
        _seen.clear()
