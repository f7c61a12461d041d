"""A pool of long-lived worker processes that analyse captures one at a time, where a worker that
dies (OOM killer, signal, crash in native code) fails only the capture it held.

Every capture is bounded: a worker's address space is capped (`memory_mb`: an allocation beyond
it fails with MemoryError, reported as that capture's failure), and a capture still running after
`timeout_s` has its worker killed and replaced (the capture fails, saying so); the others go on.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from mindspeed_profiler.analysis.pipeline.discover import Capture


@dataclass(frozen=True)
class Limits:
    """What one capture's analysis may take (None: no limit)."""

    timeout_s: float | None = 1800.0
    memory_mb: int | None = None


def _cap_memory(memory_mb: int | None) -> None:
    if memory_mb:
        import resource

        limit = int(memory_mb) << 20
        try:
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        except (ValueError, OSError):
            pass   # a hard limit below ours (set by the system) stays the one that applies


def _worker_main(conn, root: str, top_n: int, want_events: bool, fn: Callable, memory_mb: int | None = None) -> None:
    """A long-lived worker: analyse the captures it is sent, one at a time, until None."""
    _cap_memory(memory_mb)
    while True:
        try:
            msg = conn.recv()
        except EOFError:
            return
        if msg is None:
            return
        i, cap = msg
        conn.send((i, fn(root, cap, top_n, want_events)))


def failed_result(cap: Capture, why: str) -> dict:
    r = cap.to_dict()
    r.update(status="failed", error=why)
    return {"capture": r, "events": None}


def _died(cap: Capture, exitcode: int | None) -> dict:
    import signal
    if exitcode is not None and exitcode < 0:
        try:
            sig = signal.Signals(-exitcode).name
        except ValueError:
            sig = f"signal {-exitcode}"
        how = f"killed by {sig}" + (" (out of memory? the kernel's OOM killer sends SIGKILL)" if sig == "SIGKILL" else "")
    else:
        how = f"exited with code {exitcode}"
    return failed_result(cap, f"worker process died while analysing this capture: {how}")


def run_pool(root: Path, todo: list[Capture], jobs: int, top_n: int, want_events: bool,
             done: Callable[[int, dict], None], fn: Callable, limits: Limits = Limits()) -> None:
    """Analyse `todo` in `jobs` long-lived worker processes. A worker that dies (OOM killer,
    signal, crash in native code) or runs past the time limit fails only the capture it held; it
    is replaced and the rest go on."""
    import multiprocessing as mp   # here: a lone capture runs without a pool (4 ms of its start otherwise)
    from multiprocessing.connection import wait
    ctx = mp.get_context("forkserver") if "forkserver" in mp.get_all_start_methods() else mp.get_context()
    if ctx.get_start_method() == "forkserver":
        ctx.set_forkserver_preload(["mindspeed_profiler.analysis.pipeline.capture"])
    queue = list(range(len(todo)))[::-1]          # pop() from the end = in order
    workers: list[dict] = []

    def start() -> dict:
        parent, child = ctx.Pipe()
        p = ctx.Process(target=_worker_main, args=(child, str(root), top_n, want_events, fn, limits.memory_mb),
                        daemon=True)
        p.start()
        child.close()
        return {"proc": p, "conn": parent, "task": None, "since": None}

    def feed(w: dict) -> None:
        if queue:
            i = queue.pop()
            w["task"], w["since"] = i, time.monotonic()
            try:
                w["conn"].send((i, todo[i].to_dict()))
            except OSError:   # it died as it started: the wait below sees it and fails this capture only
                pass

    def replace(w: dict, result: dict) -> None:
        i = w["task"]
        w["task"] = None
        w["conn"].close()
        done(i, result)
        workers.remove(w)
        if queue:
            nw = start()
            workers.append(nw)
            feed(nw)

    try:
        for _ in range(min(jobs, len(todo))):
            w = start()
            workers.append(w)
            feed(w)
        while any(w["task"] is not None for w in workers):
            busy = [w for w in workers if w["task"] is not None]
            timeout = None
            if limits.timeout_s:
                timeout = max(0.0, min(w["since"] for w in busy) + limits.timeout_s - time.monotonic())
            ready = wait([w["conn"] for w in busy] + [w["proc"].sentinel for w in busy], timeout)
            for w in busy:
                if w["conn"] not in ready and w["proc"].sentinel not in ready:
                    if limits.timeout_s and time.monotonic() - w["since"] >= limits.timeout_s:
                        w["proc"].kill()
                        w["proc"].join(5)
                        replace(w, failed_result(todo[w["task"]], f"analysis took longer than {limits.timeout_s:g} s "
                                                            "(the per-capture time limit): stopped"))
                    continue
                i = w["task"]
                try:
                    if not w["conn"].poll():
                        raise EOFError
                    j, res = w["conn"].recv()
                    w["task"] = None
                    done(j, res)
                    feed(w)
                except (EOFError, OSError):   # died before (or while) answering
                    w["proc"].join(5)
                    replace(w, _died(todo[i], w["proc"].exitcode))
    finally:
        for w in workers:
            try:
                w["conn"].send(None)
                w["conn"].close()
            except OSError:
                pass
        for w in workers:
            w["proc"].join(5)
            if w["proc"].is_alive():
                w["proc"].kill()
                w["proc"].join()
