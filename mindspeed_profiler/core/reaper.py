"""Short-lived children (the analysis's forked helpers) killed and left to exit on their own core.

Waiting for a child to exit also waits for the kernel to take its memory apart: after a parse that
is tens of MB of pages, 2-14 ms each on the analyse command's critical path (issue 34: ~15 ms of a
cold run on the CUDA trace, ~26 ms on the MTIA one). `let_go(pid)` kills a child whose work is done
(or no longer wanted) and waits for nothing; the children already gone are collected then, so that
zombies never pile up in a long-lived process, and `reap_all()` waits for the rest.

`_EXITING`, the one global: the children let go and not yet collected (this process's own pids).
"""
from __future__ import annotations

import contextlib
import os
import signal

_EXITING: set[int] = set()


def let_go(pid: int) -> None:
    """Kill `pid` (a child of this process not yet waited for: its pid cannot have been reused) and
    collect it later; those already gone now."""
    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGKILL)
    _EXITING.add(pid)
    reap_exited()


def reap_exited() -> None:
    """Collect the children let go that have exited."""
    for pid in list(_EXITING):
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:   # collected elsewhere, or not ours (after a fork)
            done = pid
        except OSError:
            continue
        if done:
            _EXITING.discard(pid)


def reap_all() -> None:
    """Wait for every child let go."""
    while _EXITING:
        pid = _EXITING.pop()
        with contextlib.suppress(OSError):
            os.waitpid(pid, 0)
