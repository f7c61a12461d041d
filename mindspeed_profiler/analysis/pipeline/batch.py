"""The offline batch: collect (discover -> prepare, e.g. parse raw Ascend captures -> analyse the
captures in parallel; here or on a Ray cluster, collect.py / ray_batch.py) -> cross-capture tables ->
summary.json / report.html / analysis.db."""
from __future__ import annotations

import os
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from mindspeed_profiler.core import formats

from mindspeed_profiler.analysis.analyzers import advisor
from mindspeed_profiler.analysis.analyzers import crossrank
from mindspeed_profiler.analysis.analyzers.tracker_metrics import with_peak
from mindspeed_profiler.analysis.pipeline.capture import analyse_capture
from mindspeed_profiler.analysis.pipeline.collect import (  # noqa: F401  (the names the batch has always offered)
    POOL_MIN_BYTES,
    UNPARSED,
    Collected,
    CollectOptions,
    Collector,
    LocalCollector,
    RunNotFound,
    collect_here,
    default_limits,
    prepare,
    run_captures,
    run_in_process,
    select_run,
    stderr_log,
)
from mindspeed_profiler.analysis.results.outputs import TotalsSpool, located, share_strings, write_summary
from mindspeed_profiler.analysis.results.sqlite_export import EventSpool, write_db
from mindspeed_profiler.analysis.pipeline.pool import Limits

EXIT_OK, EXIT_SOME_FAILED, EXIT_NOTHING_FOUND = 0, 1, 3


def _run_warnings(runs: list[str], chosen: str | None) -> list[str]:
    if len(runs) < 2 or chosen is not None:
        return []
    return [f"this directory holds {len(runs)} runs ({', '.join(runs)}): each is analysed on its own (tables carry "
            f"run_id; the timeline shown is the latest run's, every run's is in timeline_runs); "
            f"`--run {runs[-1]}` analyses one"]


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


def analyse_directory(root: str | Path, jobs: int | None = None, export_type: str = "text", top_n: int = 20,
                      html: bool = True, threshold: float = 1.2, progress: bool | None = None,
                      out_dir: str | Path | None = None, log: Callable[[str], None] | None = None,
                      python: str = sys.executable, write: bool = True, run: str | None = None,
                      limits: Limits | None = None, ray: bool = False, ray_address: str | None = None,
                      ray_task_cpus: float = 0.5, fn: Callable = analyse_capture,
                      collector: Collector | None = None, peak_tflops: float | None = None,
                      inline_detail_max: int = formats.INLINE_DETAIL_MAX, idle_only: bool = False,
                      cache: bool = False) -> tuple[dict, int]:
    """Analyse everything under `root` (only run `run`'s captures when given); write the outputs
    (unless write=False); return (summary, exit code). With ray=True, on every node of a Ray
    cluster, each capture where it lies (ray_batch.py; `root` as each node sees it). `collector`:
    any object with `collect(root, CollectOptions) -> Collected` (overrides `ray`). `peak_tflops`: the
    device peak the tracker's MFU is recomputed for (analyse --peak-tflops). `inline_detail_max`: with
    more captures than this, each one's top lists and collective blocks (formats.DETAIL_KEYS) are
    written to capture_totals.jsonl, not summary.json (load_summary puts them back). `idle_only`: a
    lone capture's trace is parsed by a second process (jobs > 1) only when a core is idle now.
    `cache`: keep each capture's result in the analysis cache under the output directory and take
    those of unchanged captures from it (result_cache.py; with write=True, without Ray; the
    analyse command's default, off with --no-cache)."""
    t_start = time.perf_counter()
    root = Path(root)
    jobs = jobs or os.cpu_count() or 1
    # each capture's totals go to capture_totals.jsonl as it finishes (the driver keeps a small
    # record per capture); an analysis that writes nothing keeps them inline
    spool = TotalsSpool(_spool_dir(root, out_dir), inline_detail_max) if write else None
    events = EventSpool(_spool_dir(root, out_dir)) if write and export_type == "db" else None
    names: dict = {}

    def keep(res: dict) -> dict:
        if events is not None:
            res = events.take(res)   # the event columns for analysis.db: to their side file too
        if spool is not None:
            return spool.take(res)
        share_strings(res["capture"], names)
        return res
    opts = CollectOptions(jobs=jobs, top_n=top_n, export_type=export_type,
                          progress=sys.stderr.isatty() if progress is None else progress, fn=fn,
                          limits=limits or default_limits(), log=log or stderr_log, python=python, run=run, keep=keep,
                          idle_only=idle_only, cache_dir=_cache_dir(root, out_dir) if cache and write else None)
    try:
        return _analyse(root, opts, collector, ray, ray_address, ray_task_cpus, run, threshold, peak_tflops, out_dir,
                        write, html, spool, events, t_start)
    finally:
        if spool is not None:
            spool.discard()   # after commit() there is nothing left to remove
        if events is not None:
            events.discard()


def _spool_dir(root: Path, out_dir: str | Path | None) -> Path | None:
    """Where the totals file is written while the captures are analysed: the output directory when
    it is known before collecting (else the system's temporary directory: outputs.TotalsSpool)."""
    if not out_dir and not (root.is_dir() or root.is_file()):
        return None
    return Path(formats.analysis_dir(root, out_dir))


def _cache_dir(root: Path, out_dir: str | Path | None) -> Path:
    """The analysis cache's directory: in the output directory (never in a capture)."""
    return Path(formats.analysis_dir(root, out_dir)) / formats.ANALYSIS_CACHE_DIR


def _analyse(root: Path, opts: CollectOptions, collector: Collector | None, ray: bool, ray_address: str | None,
             ray_task_cpus: float, run: str | None, threshold: float, peak_tflops: float | None,
             out_dir: str | Path | None, write: bool, html: bool, spool: TotalsSpool | None,
             events: EventSpool | None, t_start: float) -> tuple[dict, int]:
    jobs, export_type, top_n = opts.jobs, opts.export_type, opts.top_n
    if collector is None:
        if ray:
            from mindspeed_profiler.analysis.pipeline.ray_batch import RayCollector, RayOptions
            collector = RayCollector(RayOptions(address=ray_address, task_cpus=ray_task_cpus))
        else:
            collector = LocalCollector()
    got = collector.collect(root, opts)
    results, base = got.results, got.base
    captures = [r["capture"] for r in results] + got.unparsed
    captures.sort(key=lambda c: c["path"])
    if peak_tflops is not None:
        for c in captures:
            if isinstance(c.get("tracker"), dict) and c["tracker"].get("rows"):
                c["tracker"]["rows"], kept = with_peak(c["tracker"]["rows"], peak_tflops)
                if kept:
                    c.setdefault("warnings", []).append(
                        f"--peak-tflops {peak_tflops}: {kept} iteration(s) without perf/tokens or perf/model_parameters "
                        "(a tracker file from before they were written, or no model size given) keep their MFU")
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
        "options": {"jobs": jobs, "export_type": export_type, "top": top_n, "threshold": threshold,
                    **({"peak_tflops": peak_tflops} if peak_tflops is not None else {})},
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
    if spool is not None and spool.error:
        summary["warnings"].append(spool.error)
    summary["findings"] = advisor.findings(summary)   # after every row it reads is in the summary
    summary = located(summary, None)
    if not captures:
        return summary, code
    out = Path(formats.analysis_dir(base, out_dir, is_dir=True))
    if write:
        out.mkdir(parents=True, exist_ok=True)
        if spool is not None:
            spool.commit(out, captures)
            if spool.n_detail:
                opts.log(f"analyse: {len(captures):,} captures (more than {spool.detail_max:,}): each one's top lists and "
                         f"collective blocks are in {formats.CAPTURE_TOTALS_FILE} with its totals, not in "
                         f"{formats.SUMMARY_FILE} (its captures[*].totals.detail names them)")
        located(summary, out)
        if export_type == "db":
            write_db(out / formats.DB_FILE, summary, results, events)
    summary["elapsed_s"] = round(time.perf_counter() - t_start, 3)
    if write:
        write_summary(out / formats.SUMMARY_FILE, summary)
        if html:   # (from the analysis cache when the summary is the last one's: report_cache.py)
            from mindspeed_profiler.analysis.pipeline.report_cache import write_report
            write_report(out / formats.REPORT_FILE, summary, opts.cache_dir)
    return summary, code
