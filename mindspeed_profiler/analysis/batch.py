"""The offline batch: discover -> prepare (e.g. parse raw Ascend captures) -> analyse captures in
parallel -> cross-capture tables -> summary.json / report.html / analysis.db."""
from __future__ import annotations

import os
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from mindspeed_profiler import formats

from .analyzers import crossrank
from .capture import analyse_capture
from .discover import Capture, discover
from .inputs import input_kinds
from .outputs import write_summary
from .parsing import jsonscan
from .pool import Limits, failed_result, run_pool

POOL_MIN_BYTES = 8 << 20   # below this, starting worker processes costs more than it saves
EXIT_OK, EXIT_SOME_FAILED, EXIT_NOTHING_FOUND = 0, 1, 3
UNPARSED = "unparsed"


def prepare(root: Path, caps: list[Capture], jobs: int, export_type: str, log: Callable[[str], None],
            python: str = sys.executable) -> dict[str, str]:
    """Each input kind's preparation step; {capture path: why it cannot be analysed here}."""
    reasons: dict[str, str] = {}
    for kind in input_kinds():
        if kind.prepare is not None:
            reasons.update(kind.prepare(root, caps, jobs, export_type, log, python))
    return reasons


def run_captures(root: Path, caps: list[Capture], jobs: int, top_n: int, want_events: bool,
                 progress: bool, fn: Callable = analyse_capture, limits: Limits = Limits()) -> list[dict]:
    """Analyse captures: in bounded worker processes when there is more than one job and capture
    (and enough bytes to be worth starting them), or when a file looks like a decompression bomb
    (then also with one job); else here, under the time limit."""
    results: dict[int, dict] = {}
    bar = None
    if progress and caps:
        from rich.progress import Progress
        bar = Progress(transient=True, console=_stderr_console())
        task = bar.add_task("analysing", total=len(caps))
        bar.start()

    def done(i: int, res: dict) -> None:
        results[i] = res
        if bar:
            bar.advance(task)

    try:
        if (jobs > 1 and len(caps) > 1 and _total_bytes(root, caps) > POOL_MIN_BYTES) or _any_bomb(root, caps):
            run_pool(root, caps, jobs, top_n, want_events, done, fn, limits)
        else:
            for i, c in enumerate(caps):
                done(i, run_in_process(fn, root, c, top_n, want_events, limits.timeout_s))
    finally:
        if bar:
            bar.stop()
    return [results[i] for i in range(len(caps))]


BOMB_RATIO, BOMB_MIN_BYTES = 50, 32 << 20   # a .gz expanding 50x into more than 32 MB


def _any_bomb(root: Path, caps: list[Capture]) -> bool:
    """Whether a capture's file expands suspiciously (a decompression bomb): it is then parsed in a
    worker whose memory is capped, never in this process."""
    for c in caps:
        for f in c.files:
            try:
                size = (root / f).stat().st_size
                expanded = jsonscan.expanded_size(root / f)
            except OSError:
                continue
            if expanded > BOMB_MIN_BYTES and expanded > BOMB_RATIO * max(size, 1):
                return True
    return False


class _TimeLimit(Exception):
    pass


def run_in_process(fn: Callable, root: Path, cap: Capture, top_n: int, want_events: bool, timeout_s: float | None) -> dict:
    """One capture here, stopped after timeout_s (a timer signal, in the main thread only)."""
    if not timeout_s or threading.current_thread() is not threading.main_thread():
        return fn(str(root), cap.to_dict(), top_n, want_events)

    def expired(signum, frame):
        raise _TimeLimit()
    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, timeout_s)
    try:
        return fn(str(root), cap.to_dict(), top_n, want_events)
    except _TimeLimit:
        return failed_result(cap, f"analysis took longer than {timeout_s:g} s (the per-capture time limit): stopped")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _run_warnings(runs: list[str], chosen: str | None) -> list[str]:
    if len(runs) < 2 or chosen is not None:
        return []
    return [f"this directory holds {len(runs)} runs ({', '.join(runs)}): each is analysed on its own (tables carry "
            f"run_id; the timeline shown is the latest run's, every run's is in timeline_runs); "
            f"`--run {runs[-1]}` analyses one"]


def _total_bytes(root: Path, caps: list[Capture]) -> int:
    total = 0
    for c in caps:
        for f in c.files:
            try:
                total += (root / f).stat().st_size
            except OSError:
                pass
    return total


def default_limits() -> Limits:
    """30 minutes and half of this machine's memory per capture."""
    try:
        half = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2 >> 20
    except (ValueError, OSError, AttributeError):
        half = None
    return Limits(timeout_s=1800.0, memory_mb=half)


def _stderr_console():
    from rich.console import Console
    return Console(stderr=True)


class RunNotFound(ValueError):
    """`--run ID` names a run the directory does not hold."""


def select_run(root: Path, caps: list[Capture], run: str) -> list[Capture]:
    """The captures of one run; a timeline holding that run is kept and told to analyse it only."""
    from .merge import read_segments

    known = {c.run_id for c in caps if c.run_id and c.kind != "timeline"}
    chosen = [c for c in caps if c.run_id == run and c.kind != "timeline"]
    for c in caps:
        if c.kind == "timeline":
            try:   # segments: their headers say which runs they hold; a merged file is one run's
                runs = set(read_segments(str(root / c.path)).runs()) if not c.files else {c.run_id}
            except (OSError, ValueError):
                runs = set()
            known |= {r for r in runs if r}
            if run in runs or (c.files and c.run_id is None):
                c.run_id = run
                chosen.append(c)
    if not chosen:
        raise RunNotFound(f"no capture of run {run!r} here (runs found: {', '.join(sorted(known)) or 'none with an id'})")
    return chosen


def runs_of(captures: list[dict]) -> list[str]:
    """The run ids the analysed captures come from, oldest first: a capture's start time, a
    timeline's order of its runs (by their clocks), else the id (time-prefixed by start_run)."""
    first: dict[str, tuple] = {}
    for c in captures:
        for k, r in enumerate(c.get("timeline_runs") or []):
            if r.get("run_id"):
                first.setdefault(r["run_id"], ("", k))
        rid = c.get("run_id")
        if rid and not c.get("timeline"):
            start = str(((c.get("meta") or {}).get("start_time")) or "")
            first[rid] = min(first.get(rid, (start, 0)), (start, 0)) if start else first.get(rid, ("", 0))
    return sorted(first, key=lambda r: (first[r], r))


def cross_capture_rows(captures: list[dict], runs: list[str]) -> list[dict]:
    """stage_rank rows, per run when there are several (never mixing two runs' numbers)."""
    if len(runs) < 2:
        return crossrank.stage_rank_rows(captures)
    rows = []
    for rid in runs:
        mine = [c for c in captures if c.get("run_id") == rid and not c.get("timeline")]
        for c in captures:   # each run's own timeline analysis
            for r in c.get("timeline_runs") or []:
                if r.get("run_id") == rid:
                    mine.append({"kind": "timeline", "status": "ok", "path": c["path"], "timeline": r})
        rows += [{**row, "run_id": rid} for row in crossrank.stage_rank_rows(mine)]
    return rows


@dataclass
class Collected:
    """What the dispatch hands to the cross-capture tables and outputs (one code path for both)."""

    results: list[dict]                     # analyse_capture results: {"capture", "events"}
    unparsed: list[dict]                    # captures that stay unanalysed (status "unparsed", error = why)
    base: Path                              # the directory DIR/analysis goes in (unless out_dir)
    warnings: list[str] = field(default_factory=list)
    extra: dict = field(default_factory=dict)   # more summary keys (with --ray: "ray")
    root: Path | None = None                # DIR as this machine names it, when not `root` (--ray: ~ and $VARS expanded)


def collect_here(root: Path, jobs: int, top_n: int, export_type: str, progress: bool, fn: Callable,
                 limits: Limits, log: Callable[[str], None], python: str, run: str | None) -> Collected:
    """Discover, prepare and analyse on this machine (a pool of worker processes)."""
    if not root.exists():
        raise FileNotFoundError(f"analyse: directory {str(root)!r} does not exist")
    base = root if root.is_dir() else root.parent
    caps = discover(root)
    if run is not None:
        caps = select_run(base, caps, run)
    reasons = prepare(base, caps, jobs, export_type, log, python)
    todo = [c for c in caps if c.path not in reasons]
    results = run_captures(base, todo, jobs, top_n, export_type == "db", progress, fn, limits=limits)
    unparsed = []
    for c in caps:
        if c.path in reasons:
            d = c.to_dict()
            d.update(status=UNPARSED, error=reasons[c.path])
            unparsed.append(d)
    return Collected(results, unparsed, base)


def analyse_directory(root: str | Path, jobs: int | None = None, export_type: str = "text", top_n: int = 20,
                      html: bool = True, threshold: float = 1.2, progress: bool | None = None,
                      out_dir: str | Path | None = None, log: Callable[[str], None] | None = None,
                      python: str = sys.executable, write: bool = True, run: str | None = None,
                      limits: Limits | None = None, ray: bool = False, ray_address: str | None = None,
                      ray_task_cpus: float = 0.5, fn: Callable = analyse_capture) -> tuple[dict, int]:
    """Analyse everything under `root` (only run `run`'s captures when given); write the outputs
    (unless write=False); return (summary, exit code). With ray=True, on every node of a Ray
    cluster, each capture where it lies (ray_batch.py; `root` as each node sees it)."""
    t_start = time.perf_counter()
    root = Path(root)
    log = log or (lambda m: print(m, file=sys.stderr))
    jobs = jobs or os.cpu_count() or 1
    if progress is None:
        progress = sys.stderr.isatty()
    limits = limits or default_limits()
    if ray:
        from .ray_batch import RayOptions, analyse_on_ray
        got = analyse_on_ray(root, RayOptions(address=ray_address, task_cpus=ray_task_cpus), jobs=jobs, top_n=top_n,
                             export_type=export_type, progress=progress, fn=fn, limits=limits, log=log,
                             python=None if python == sys.executable else python, run=run)
    else:
        got = collect_here(root, jobs, top_n, export_type, progress, fn, limits, log, python, run)
    results, base = got.results, got.base
    captures = [r["capture"] for r in results] + got.unparsed
    captures.sort(key=lambda c: c["path"])
    runs = runs_of(captures)
    rows = cross_capture_rows(captures, runs)
    counts = {"found": len(captures), "ok": sum(c["status"] == "ok" for c in captures),
              "failed": sum(c["status"] == "failed" for c in captures),
              "unparsed": sum(c["status"] == UNPARSED for c in captures)}
    code = EXIT_NOTHING_FOUND if not captures else EXIT_OK if counts["ok"] == len(captures) else EXIT_SOME_FAILED
    timelines = [c for c in captures if c.get("timeline") and c["status"] == "ok"]
    summary = {
        "schema": formats.SUMMARY_SCHEMA, "tool": "mindspeed-profiler analyse", "root": str((got.root or root).resolve()),
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "options": {"jobs": jobs, "export_type": export_type, "top": top_n, "threshold": threshold},
        "counts": counts, "exit_code": code,
        "captures": captures,
        "runs": runs,
        "warnings": _run_warnings(runs, run) + got.warnings,
        "stage_rank": rows,
        "slow_ranks": crossrank.slow_ranks(rows, threshold),
        "timeline": timelines[0]["timeline"] if timelines else None,
        **got.extra,
        "elapsed_s": None,
    }
    if not captures:
        return summary, code
    out = Path(out_dir) if out_dir else base / formats.ANALYSIS_DIR
    if write:
        out.mkdir(parents=True, exist_ok=True)
        if export_type == "db":
            from .sqlite_export import write_db
            write_db(out / formats.DB_FILE, summary, results)
    summary["elapsed_s"] = round(time.perf_counter() - t_start, 3)
    if write:
        write_summary(out / formats.SUMMARY_FILE, summary)
        if html:
            from .report import write_report
            write_report(out / formats.REPORT_FILE, summary)
    return summary, code
