"""A pool of long-lived worker processes that analyse captures one at a time, where a worker that
dies (OOM killer, signal, crash in native code) fails only the capture it held."""
from __future__ import annotations

import multiprocessing as mp
from pathlib import Path
from typing import Callable

from .discover import Capture


def _worker_main(conn, root: str, top_n: int, want_events: bool, fn: Callable) -> None:
    """A long-lived worker: analyse the captures it is sent, one at a time, until None."""
    while True:
        try:
            msg = conn.recv()
        except EOFError:
            return
        if msg is None:
            return
        i, cap = msg
        conn.send((i, fn(root, cap, top_n, want_events)))


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
    r = cap.to_dict()
    r.update(status="failed", error=f"worker process died while analysing this capture: {how}")
    return {"capture": r, "events": None}


def run_pool(root: Path, todo: list[Capture], jobs: int, top_n: int, want_events: bool,
              done: Callable[[int, dict], None], fn: Callable) -> None:
    """Analyse `todo` in `jobs` long-lived worker processes. A worker that dies (OOM killer,
    signal, crash in native code) fails only the capture it held; it is replaced and the rest go on."""
    from multiprocessing.connection import wait
    ctx = mp.get_context("forkserver") if "forkserver" in mp.get_all_start_methods() else mp.get_context()
    if ctx.get_start_method() == "forkserver":
        ctx.set_forkserver_preload(["mindspeed_profiler.analysis.capture"])
    queue = list(range(len(todo)))[::-1]          # pop() from the end = in order
    workers: list[dict] = []

    def start() -> dict:
        parent, child = ctx.Pipe()
        p = ctx.Process(target=_worker_main, args=(child, str(root), top_n, want_events, fn), daemon=True)
        p.start()
        child.close()
        return {"proc": p, "conn": parent, "task": None}

    def feed(w: dict) -> None:
        if queue:
            i = queue.pop()
            w["task"] = i
            w["conn"].send((i, todo[i].to_dict()))

    try:
        for _ in range(min(jobs, len(todo))):
            w = start()
            workers.append(w)
            feed(w)
        while any(w["task"] is not None for w in workers):
            busy = [w for w in workers if w["task"] is not None]
            ready = wait([w["conn"] for w in busy] + [w["proc"].sentinel for w in busy])
            for w in busy:
                if w["conn"] not in ready and w["proc"].sentinel not in ready:
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
                    w["task"] = None
                    w["conn"].close()
                    done(i, _died(todo[i], w["proc"].exitcode))
                    workers.remove(w)
                    if queue:
                        nw = start()
                        workers.append(nw)
                        feed(nw)
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
