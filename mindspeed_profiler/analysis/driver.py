"""The offline batch: discover -> (parse raw Ascend captures) -> analyse captures in parallel
-> cross-capture tables -> summary.json / report.html / analysis.db."""
from __future__ import annotations

import multiprocessing as mp
import os
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

import orjson

from . import ascend, crossrank
from .capture import analyse_capture
from .discover import Capture, discover

SCHEMA = 1
POOL_MIN_BYTES = 8 << 20   # below this, starting worker processes costs more than it saves
EXIT_OK, EXIT_SOME_FAILED, EXIT_NOTHING_FOUND = 0, 1, 3


def _handle_raw(root: Path, caps: list[Capture], jobs: int, export_type: str, log: Callable[[str], None],
                python: str = sys.executable) -> dict[str, str]:
    """Parse raw Ascend captures with torch_npu when it works here; else a reason per capture."""
    raw = [c for c in caps if c.kind == "ascend_raw"]
    if not raw:
        return {}
    ok, why = ascend.npu_parser_available(python)
    reasons: dict[str, str] = {}
    for c in raw:
        where = root / c.path
        if not ok:
            reasons[c.path] = (f"raw Ascend capture, not parsed yet (no ASCEND_PROFILER_OUTPUT): torch_npu with CANN "
                               f"is not usable here ({why}). Parse it on a machine with torch_npu + CANN: "
                               f"`mindspeed-profiler analyse {where}` (or torch_npu.profiler.profiler.analyse('{where}'))")
            continue
        log(f"parsing raw Ascend capture with torch_npu: {where}")
        done, msg = ascend.parse_raw(where, jobs, export_type, python)
        out = where / "ASCEND_PROFILER_OUTPUT"
        text = [out / n for n in ("trace_view.json", "kernel_details.csv", "step_trace_time.csv") if (out / n).is_file()]
        dbs = sorted(out.glob("ascend_pytorch_profiler*.db")) if out.is_dir() else []
        if done and (text or dbs):
            c.kind = "ascend"
            c.files = [os.path.relpath(p, root) for p in (text or dbs)]
        else:
            reasons[c.path] = msg or "torch_npu offline parse wrote no ASCEND_PROFILER_OUTPUT"
    return reasons


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


def _run_pool(root: Path, todo: list[Capture], jobs: int, top_n: int, want_events: bool,
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


def run_captures(root: Path, caps: list[Capture], jobs: int, top_n: int, want_events: bool,
                 progress: bool, fn: Callable = analyse_capture) -> list[dict]:
    """Analyse captures, in worker processes when there is more than one job and capture
    (and enough bytes to be worth starting them)."""
    todo = [c for c in caps if c.kind != "ascend_raw"]
    results: dict[int, dict] = {}
    bar = None
    if progress and todo:
        from rich.progress import Progress
        bar = Progress(transient=True, console=_stderr_console())
        task = bar.add_task("analysing", total=len(todo))
        bar.start()

    def done(i: int, res: dict) -> None:
        results[i] = res
        if bar:
            bar.advance(task)

    try:
        if jobs > 1 and len(todo) > 1 and _total_bytes(root, todo) > POOL_MIN_BYTES:
            _run_pool(root, todo, jobs, top_n, want_events, done, fn)
        else:
            for i, c in enumerate(todo):
                done(i, fn(str(root), c.to_dict(), top_n, want_events))
    finally:
        if bar:
            bar.stop()
    return [results[i] for i in range(len(todo))]


def _total_bytes(root: Path, caps: list[Capture]) -> int:
    total = 0
    for c in caps:
        for f in c.files:
            try:
                total += (root / f).stat().st_size
            except OSError:
                pass
    return total


def _stderr_console():
    from rich.console import Console
    return Console(stderr=True)


def analyse_directory(root: str | Path, jobs: int | None = None, export_type: str = "text", top_n: int = 20,
                      html: bool = True, threshold: float = 1.2, progress: bool | None = None,
                      out_dir: str | Path | None = None, log: Callable[[str], None] | None = None,
                      python: str = sys.executable) -> tuple[dict, int]:
    """Analyse everything under `root`; write the outputs; return (summary, exit code)."""
    t_start = time.perf_counter()
    root = Path(root)
    log = log or (lambda m: print(m, file=sys.stderr))
    if not root.exists():
        raise FileNotFoundError(f"analyse: directory {str(root)!r} does not exist")
    jobs = jobs or os.cpu_count() or 1
    if progress is None:
        progress = sys.stderr.isatty()
    base = root if root.is_dir() else root.parent
    caps = discover(root)
    reasons = _handle_raw(base if root.is_file() else root, caps, jobs, export_type, log, python)
    results = run_captures(base if root.is_file() else root, caps, jobs, top_n, export_type == "db", progress)
    captures = [r["capture"] for r in results]
    for c in caps:
        if c.kind == "ascend_raw":
            d = c.to_dict()
            d.update(status="unparsed", error=reasons.get(c.path, "not parsed"))
            captures.append(d)
    captures.sort(key=lambda c: c["path"])
    rows = crossrank.stage_rank_rows(captures)
    counts = {"found": len(captures), "ok": sum(c["status"] == "ok" for c in captures),
              "failed": sum(c["status"] == "failed" for c in captures),
              "unparsed": sum(c["status"] == "unparsed" for c in captures)}
    code = EXIT_NOTHING_FOUND if not captures else EXIT_OK if counts["ok"] == len(captures) else EXIT_SOME_FAILED
    timelines = [c for c in captures if c["kind"] == "timeline" and c["status"] == "ok"]
    summary = {
        "schema": SCHEMA, "tool": "mindspeed-profiler analyse", "root": str(root.resolve()),
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "options": {"jobs": jobs, "export_type": export_type, "top": top_n, "threshold": threshold},
        "counts": counts, "exit_code": code,
        "captures": captures,
        "stage_rank": rows,
        "slow_ranks": crossrank.slow_ranks(rows, threshold),
        "timeline": timelines[0]["timeline"] if timelines else None,
        "elapsed_s": None,
    }
    out = Path(out_dir) if out_dir else base / "analysis"
    if captures:
        out.mkdir(parents=True, exist_ok=True)
        if export_type == "db":
            from .sqlite_export import write_db
            write_db(out / "analysis.db", summary, results)
        summary["elapsed_s"] = round(time.perf_counter() - t_start, 3)
        write_summary(out / "summary.json", summary)
        if html:
            from .report_html import write_report
            write_report(out / "report.html", summary)
    return summary, code


def write_summary(path: Path, summary: dict) -> None:
    path.write_bytes(orjson.dumps(summary, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY
                                  | orjson.OPT_NON_STR_KEYS))


def load_summary(path: Path) -> dict:
    return orjson.loads(Path(path).read_bytes())


def find_summary(p: str | Path) -> Path | None:
    """summary.json given a run directory, an analysis directory or the file itself."""
    p = Path(p)
    for cand in (p, p / "summary.json", p / "analysis" / "summary.json"):
        if cand.is_file() and cand.name == "summary.json":
            return cand
    return None
