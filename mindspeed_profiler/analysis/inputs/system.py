"""Process-level reports (profiler_config.system, docs/system-profiling.md): a directory holding
`<group>_rank<R>.system.json` files is one capture of kind `system`; each wrapped worker is one row.

  - py-spy reports are read here: where each worker's Python time goes (self and total time per
    function, on its busiest thread), per stage when the run's timeline has that worker's stage
    spans, cut to the listed iterations when `steps` was set;
  - `.nsys-rep` and msprof outputs are summarised with the vendor's tool when it is on PATH (`nsys
    stats`, msprof-analyze); without it the capture is "unparsed" with the reason
    "not parsed: needs <tool>" (prepare), never "failed"; rocprof-sys outputs are listed.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Callable

from mindspeed_profiler.core import formats

from ..analyzers.pyspy_frames import clip, frame_times, stage_frame_times
from mindspeed_profiler.analysis.pipeline.discover import Capture, rel, walk
from ..parsing.pyspy import PySpyTrace, read_pyspy
from ..parsing.system_files import SystemWorker, is_system_dir, read_system_dir
from ..parsing.vendor_stats import MSPROF_ANALYZE, NSYS, msprof_analyze, needs, nsys_stats
from mindspeed_profiler.analysis.timeline.system_align import (
    alignment_for,
    find_process,
    pyspy_anchor,
    stage_spans,
    timeline_candidates,
)
from . import InputKind, register_input

# backend -> the tool that reads its report here (None: read by us; "" : nothing reads it)
READERS: dict[str, str | None] = {"py_spy": None, "nsight": NSYS, "msprof": MSPROF_ANALYZE, "rocprof_sys": ""}
NO_LISTED_ITERATION = ("steps were set, but the worker recorded none of them (does it run an IntegratedProfiler, "
                       "whose start / step / stop mark the iterations?): nothing is left after the cut")
ROCPROF_NOTE = "not parsed: needs rocprof-sys's own tools (open its perfetto-trace file in https://ui.perfetto.dev)"


def _claim(root: Path, d: Path) -> Capture | None:
    try:
        names = sorted(os.listdir(d))
    except OSError:
        return None
    if not is_system_dir(names):
        return None
    return Capture(path=rel(root, d), kind="system",
                   files=[rel(root, d / n) for n in names if n.endswith(formats.SYSTEM_META_SUFFIX)])


def unparsed_reason(w: SystemWorker) -> str | None:
    """Why this worker's report cannot be read here, or None."""
    reader = READERS.get(w.backend)
    if reader is None:
        return None if w.backend in READERS else f"not parsed: unknown system backend {w.backend!r}"
    return needs(reader) if reader else ROCPROF_NOTE


def prepare(root: Path, caps: list[Capture], jobs: int, export_type: str, log: Callable[[str], None],
            python: str = sys.executable) -> dict[str, str]:
    """A system directory whose every report needs a tool missing here stays unparsed (not failed)."""
    reasons: dict[str, str] = {}
    for c in caps:
        if c.kind != "system":
            continue
        with_report = [w for w in read_system_dir(root / c.path) if w.report.exists()]
        why = [unparsed_reason(w) for w in with_report]
        if with_report and all(why):
            reasons[c.path] = "; ".join(sorted(set(filter(None, why))))
    return reasons


def analyse(root: Path, cap: Capture, top_n: int, want_events: bool) -> tuple[dict, None]:
    d = root / cap.path
    workers = read_system_dir(d)
    if not workers:
        raise FileNotFoundError(f"no {formats.SYSTEM_META_SUFFIX} metadata in {d}")
    timelines: dict[Any, dict | None] = {}
    rows = [_worker_row(w, d, timelines, top_n) for w in workers]
    if not any(r.get("parsed") == "ok" for r in rows) and not any(r.get("parsed") == "unparsed" for r in rows):
        raise ValueError("no report to read: " + "; ".join(
            f"{r['group']}:{r['rank']} {r['status']}: {r.get('error') or r.get('reason') or '; '.join(r['problems']) or 'no report'}"
            for r in rows))
    return {"system": {"backends": sorted({r["backend"] for r in rows}), "workers": rows}}, None


def _worker_row(w: SystemWorker, d: Path, timelines: dict, top_n: int) -> dict:
    m = w.meta
    row = {k: m.get(k) for k in ("group", "rank", "backend", "tool", "version", "status", "reason", "host", "report",
                                 "report_bytes", "steps", "run_id")}
    row["pid"] = w.pid
    row["problems"] = list(w.problems)
    if not w.report.exists():
        row["parsed"] = "none"
        return row
    why = unparsed_reason(w)
    if why:
        row.update(parsed="unparsed", unparsed_reason=why, files=_listing(w.report))
        return row
    try:
        if w.backend == "py_spy":
            row["py_spy"] = pyspy_summary(w, _timeline(d, m.get("run_id"), timelines), top_n)
        elif w.backend == "nsight":
            row["nsys_stats"] = nsys_stats(w.report, top_n)
        elif w.backend == "msprof":
            row["msprof_analyze"] = msprof_analyze(w.report, top_n)
        row["parsed"] = "ok"
    except Exception as exc:  # noqa: BLE001 - one worker's bad report is reported in its row
        row.update(parsed="failed", error=f"{type(exc).__name__}: {exc}")
    return row


def _listing(report: Path) -> list[str]:
    """The first 50 files of a report (walked without recursion: rglob failed 1,000 levels deep)."""
    if report.is_dir():
        return sorted(str((d / n).relative_to(report)) for d, _, names in walk(report) for n in names
                      if os.path.isfile(d / n))[:50]
    return [report.name]


def _timeline(system_dir: Path, run_id: str | None, cache: dict) -> dict | None:
    """The run's merged timeline (this run's own file first), or merged now from its segments."""
    if run_id not in cache:
        from mindspeed_profiler.analysis.timeline.merge import build_timeline, read_timeline_file

        where, files = timeline_candidates(system_dir, run_id)
        try:
            cache[run_id] = read_timeline_file(str(files[0])) if files else \
                build_timeline(str(where)) if where.is_dir() else None
        except (OSError, ValueError):
            cache[run_id] = None
    return cache[run_id]


def pyspy_summary(w: SystemWorker, trace: dict | None, top_n: int) -> dict:
    spy = read_pyspy(w.report)
    anchor, how, uncertainty = pyspy_anchor(w.meta, w.clock_marks, spy)
    main = _busiest_thread(spy)
    segments = [s for s in spy.segments if s[3] == main]
    windows = w.step_windows_ns()
    if windows is not None and anchor is not None:
        segments = clip(segments, [((a - anchor) / 1e3, (b - anchor) / 1e3) for a, b in windows])
    rate = float((w.clock_marks[0].get("rate_hz") if w.clock_marks else None) or 100.0)
    out: dict[str, Any] = {"rate_hz": rate, "clock": how, "clock_uncertainty_us": uncertainty,
                           "main_thread": main, "threads": _threads(spy), "cut_to_steps": w.meta.get("steps"),
                           **frame_times(spy, segments, top_n)}
    out["samples_est"] = int(round(out["sampled_ms"] / 1e3 * rate))
    if windows == []:
        out["note"] = NO_LISTED_ITERATION
    proc = find_process(trace, w.host, w.pid) if trace is not None else None
    out["timeline_process"] = proc.get("name") if proc else None
    align = alignment_for(anchor, proc, trace)
    if proc is not None and align is not None:
        spans = [{"stage": s["stage"], "start_us": align.timeline_to_pyspy_us(s["ts"]),
                  "end_us": align.timeline_to_pyspy_us(s["ts"] + s["dur"])} for s in stage_spans(trace, proc["pid"])]
        out["stages"] = [r for r in stage_frame_times(spy, segments, spans, min(top_n, 10)) if r["sampled_ms"] > 0]
    else:
        out["stages"] = []
    return out


def _busiest_thread(spy: PySpyTrace) -> int:
    """The thread whose stack changes most: the one doing the work (a Ray actor's tasks run on its
    main thread; with --idle the others are mostly parked in one stack)."""
    counts: dict[int, int] = {}
    for s in spy.spans:
        counts[s[4]] = counts.get(s[4], 0) + 1
    return max(counts, key=lambda t: (counts[t], -t)) if counts else 0


def _threads(spy: PySpyTrace) -> list[dict]:
    sampled: dict[int, float] = {}
    for s, e, _, th in spy.segments:
        sampled[th] = sampled.get(th, 0.0) + (e - s)
    return [{"thread": th, "os_tid": spy.threads[th][1], "sampled_ms": sampled.get(th, 0.0) / 1e3}
            for th in range(len(spy.threads))]


register_input(InputKind("system", analyse, order=25, claim_dir=_claim, prepare=prepare))
