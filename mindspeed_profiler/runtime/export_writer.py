"""The background writer: what of a capture's export can be written later (its compression, the
memory snapshot's pickle, the final metadata) runs here, off the training thread.

One daemon thread per process, started at the first job, with a bounded queue: past
`MAX_IN_FLIGHT` captures waiting, `submit` blocks the training thread until one is done (the wait
is recorded in the capture's phases), so a job that captures faster than it can write never holds
more than that many raw traces on disk and in flight. A thread, not a process: the work is zlib
(which releases the GIL) and file writes, and a thread needs no copy of the capture
(benchmarks/bench_capture_cost.py measures both; docs/perf_capture.md).

`wait(tokens, timeout)` bounds how long stop(), interpreter exit and SIGTERM wait; what is not done
by then is returned so the caller can say so. A daemon thread, because the interpreter joins
non-daemon threads before atexit handlers run, where the profilers are stopped.

The same thread runs the periodic checks registered with `every(key, fn)` (the host memory
watermark, metrics/host_watermark.py) about every TICK_S while it waits for a job, and after each
job: they must be quick and never raise (an exception is swallowed).

The one documented global: `WRITER` (a process has one; a fork's child starts with a fresh one).
"""
from __future__ import annotations

import os
import queue
import threading
import time
from typing import Callable

MAX_IN_FLIGHT = 2  # captures queued behind the one being written
TICK_S = 0.5       # how often the periodic checks run while the thread waits


class Job:
    """One capture's deferred export: `run()` on the writer thread; `done` set when it returned."""

    __slots__ = ("name", "run", "done", "error")

    def __init__(self, name: str, run: Callable[[], None]):
        self.name = name
        self.run = run
        self.done = threading.Event()
        self.error: BaseException | None = None


class ExportWriter:
    """A bounded queue of jobs and the thread that runs them in order."""

    def __init__(self, max_in_flight: int = MAX_IN_FLIGHT):
        self._queue: queue.Queue[Job] = queue.Queue(maxsize=max_in_flight)
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.pending: list[Job] = []   # submitted, not done (oldest first)
        self.ticks: dict[object, Callable[[], None]] = {}   # every(): run on this thread about every TICK_S

    def every(self, key: object, fn: Callable[[], None]) -> None:
        """Run `fn()` on the writer thread about every TICK_S (started if needed); `key` replaces
        an earlier one (cancel(key) removes it)."""
        with self._lock:
            self.ticks[key] = fn
        self._ensure_thread()

    def cancel(self, key: object) -> None:
        with self._lock:
            self.ticks.pop(key, None)

    def _tick(self) -> None:
        with self._lock:
            fns = list(self.ticks.values())
        for fn in fns:
            try:
                fn()
            except Exception:   # a check reports its own failures; this is the last net
                pass

    def submit(self, name: str, run: Callable[[], None]) -> tuple[Job, float]:
        """Queue `run` (it must not raise; an exception is kept on the job); returns the job and
        the seconds the caller waited for room in the queue."""
        job = Job(name, run)
        self._ensure_thread()
        with self._lock:
            self.pending.append(job)
        t0 = time.perf_counter()
        self._queue.put(job)
        return job, time.perf_counter() - t0

    def wait(self, jobs: list[Job] | None = None, timeout: float | None = None) -> list[Job]:
        """Wait for `jobs` (default: every pending one) at most `timeout` seconds in all; the jobs
        not done by then."""
        jobs = list(self.pending) if jobs is None else jobs
        deadline = None if timeout is None else time.monotonic() + timeout
        for job in jobs:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            job.done.wait(left)
        return [j for j in jobs if not j.done.is_set()]

    def _ensure_thread(self) -> None:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name="mindspeed-profiler-export", daemon=True)
                self._thread.start()

    def _loop(self) -> None:
        while True:
            try:
                job = self._queue.get(timeout=TICK_S)
            except queue.Empty:
                self._tick()
                continue
            try:
                job.run()
            except BaseException as exc:   # a job reports its own failures; this is the last net
                job.error = exc
            finally:
                with self._lock:
                    if job in self.pending:
                        self.pending.remove(job)
                job.done.set()
            self._tick()


WRITER = ExportWriter()


def _fresh_after_fork() -> None:
    """A forked child has no writer thread and none of the parent's jobs are its own."""
    global WRITER
    WRITER = ExportWriter()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_fresh_after_fork)
