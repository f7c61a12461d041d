"""One function computed in a forked child while this process does something else (issue 34: the
second core of a lone capture's analysis, after the parse). The child gets a copy-on-write image of
this process, so `fn` reads the same tables without copying them; its result comes back pickled.

Never a different result: where there is no fork, or the child fails, dies or sends something
unreadable, `Pending.result()` computes `fn` here, so an error is raised here as it would have been
without the child. Only for work whose result is small beside its inputs (a block of a summary, a
file written by the child itself).
"""
from __future__ import annotations

import contextlib
import os
import pickle
import sys
import warnings
from typing import Any, Callable

from mindspeed_profiler.core import reaper

_OK, _FAILED = b"o", b"f"


def available() -> bool:
    return hasattr(os, "fork") and sys.platform.startswith("linux")


def core_idle() -> bool:
    """Whether a core of those this process may run on is idle now. A second process only pays
    where one is (issue 34: on the 2-core box at load 2.4, the CUDA trace's command took 1.13 s with
    a helper and children, 0.98 s without). Idle when what runs now says so (runnable_others: no
    more of others' tasks runnable than the cores left after this process and one child) or the
    1-minute load average does (at least one below the cores): the load average alone lags a minute behind, so on an
    idle box after a busy minute the command ran on one core (the CUDA trace: 0.70 s, not 0.51 s)."""
    try:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    except OSError:
        cores = os.cpu_count() or 1
    others = runnable_others()
    if others is not None and others <= cores - 2:
        return True
    try:
        return os.getloadavg()[0] <= cores - 1
    except OSError:   # no load average here: assume the cores the caller asked for are free
        return others is None


def runnable_others() -> int | None:
    """Tasks runnable on this machine at this moment, this process and its running children aside
    (Linux: /proc/loadavg's fourth field, the children's /proc/PID/stat); None where unknown."""
    try:
        with open("/proc/loadavg") as fh:
            runnable = int(fh.read().split()[3].split("/")[0])
        with open(f"/proc/self/task/{os.getpid()}/children") as fh:
            children = fh.read().split()
    except (OSError, ValueError, IndexError):
        return None
    ours = 1   # this process, running as it reads
    for pid in children:
        try:
            with open(f"/proc/{pid}/stat") as fh:
                ours += fh.read().rpartition(")")[2].split()[0] == "R"
        except (OSError, IndexError):
            pass   # gone meanwhile
    return max(0, runnable - ours)


class Pending:
    """`fn(*args)`, running in a child (or to be run here when `pid` is None)."""

    def __init__(self, fn: Callable[..., Any], args: tuple, pid: int | None, fd: int | None):
        self.fn, self.args, self.pid, self.fd = fn, args, pid, fd
        self._outcome: tuple | None = None   # (value, None) or (None, exception), once known

    def result(self) -> Any:
        """The child's result; computed here when there was no child or it failed. Known once: a
        second call gives the same value or raises the same exception."""
        if self._outcome is None:
            try:
                self._outcome = (self._get(), None)
            except Exception as exc:   # noqa: BLE001  (kept for the next call, raised now)
                self._outcome = (None, exc)
        value, exc = self._outcome
        if exc is not None:
            raise exc
        return value

    def _get(self) -> Any:
        if self.pid is None:
            return self.fn(*self.args)
        try:
            with os.fdopen(self.fd, "rb") as reader:
                self.fd = None
                data = reader.read()   # to its end: the child may block on a full pipe until then
        finally:
            self._reap()
        if data[:1] == _OK:
            try:
                return pickle.loads(data[1:])
            except Exception:   # noqa: BLE001  (an unreadable result: computed here instead)
                pass
        return self.fn(*self.args)

    def cancel(self) -> None:
        if self.fd is not None:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = None
        self._reap()

    def _reap(self) -> None:
        if self.pid is not None:
            reaper.let_go(self.pid)   # gone already when it sent its result; its exit not waited for
            self.pid = None

    def __enter__(self) -> "Pending":
        return self

    def __exit__(self, *exc) -> None:
        self.cancel()   # an exception here (a time limit): the child goes with it


def start(fn: Callable[..., Any], *args: Any, fork: bool = True) -> Pending:
    """`fn(*args)` in a forked child when `fork` and this platform forks; else run by `result()`."""
    if not (fork and available()):
        return Pending(fn, args, None, None)
    try:
        rd, wr = os.pipe()
    except OSError:
        return Pending(fn, args, None, None)
    try:
        with warnings.catch_warnings():   # (3.12+ warns about fork with threads: the child only computes and exits)
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
    except OSError:   # no processes left: computed here
        os.close(rd)
        os.close(wr)
        return Pending(fn, args, None, None)
    if pid == 0:   # the child: whatever happens, it ends here and never returns into the caller
        try:
            os.close(rd)
            # fresh stdout / stderr objects on the same descriptors: a lock another thread of the
            # parent (a progress bar) held at the fork stays held in the child's copies
            sys.stdout = open(1, "w", closefd=False)   # noqa: SIM115
            sys.stderr = open(2, "w", closefd=False)   # noqa: SIM115
            try:
                data = _OK + pickle.dumps(fn(*args), protocol=pickle.HIGHEST_PROTOCOL)
            except BaseException:   # noqa: BLE001  (the parent computes it again and raises it there)
                data = _FAILED
            with os.fdopen(wr, "wb") as out:
                out.write(data)
            for f in (sys.stdout, sys.stderr):   # what the child said (a warning) is not lost
                f.flush()
            os._exit(0)
        finally:
            os._exit(1)
    os.close(wr)
    return Pending(fn, args, pid, rd)
