"""py-spy frames on the merged timeline: `add_system_tracks(trace, system_dir)` puts each wrapped
worker's sampled Python stacks under that worker's own process in Perfetto, on the driver's clock
(system_align.py), as extra threads "py-spy: thread <k>". Called by merge.write_timeline.

Only reports of the timeline's run are placed (run ids compared when both are known); with `steps`
the frames are cut to the listed iterations. A worker that is not on the timeline (its tracer was
off) gets a process of its own. Whatever cannot be placed is said in `otherData.warnings`; the
timeline is written anyway.
"""
from __future__ import annotations

import os
from pathlib import Path

from mindspeed_profiler.core import formats
from mindspeed_profiler.core.fileio import read_json_object

from mindspeed_profiler.analysis.timeline.system_align import Alignment, alignment_for, find_process, pyspy_anchor
from mindspeed_profiler.analysis.parsing.pyspy import read_pyspy
from mindspeed_profiler.analysis.parsing.system_files import SystemWorker, read_system_dir

PYSPY_TID_BASE = 7_000_000      # above Linux pid_max (2**22): never a real thread id
MAX_EVENTS_PER_WORKER = 300_000  # a long whole-process capture is cut here (said in the warnings)


def system_dir_of(timeline_dir: str | os.PathLike) -> Path:
    """The system directory of the run whose timeline is in `timeline_dir`: run.json's
    `system.output_dir` when set, else `<profile_save_path>/system` (the timeline's parent)."""
    timeline_dir = Path(timeline_dir)
    for d in (timeline_dir.parent, timeline_dir):
        try:
            run = read_json_object(d / formats.RUN_FILE)   # never a FIFO; None: a TypeError below
            configured = (run["config"]["profiler_config"].get("system") or {}).get("output_dir")
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue
        if isinstance(configured, str) and configured:
            return Path(configured)
        return d / formats.SYSTEM_DIR
    return timeline_dir.parent / formats.SYSTEM_DIR


def add_system_tracks(trace: dict, system_dir: str | os.PathLike | None) -> int:
    """Add the py-spy reports of `system_dir` to `trace` (a merged timeline); returns how many
    events were added. Never raises for a bad report: it is named in otherData.warnings."""
    if system_dir is None or not Path(system_dir).is_dir():
        return 0
    other = trace.setdefault("otherData", {})
    warnings = other.setdefault("warnings", [])
    run_id = other.get(formats.RUN_ID_KEY)
    placed: list[dict] = []
    added = 0
    for w in read_system_dir(Path(system_dir)):
        if w.backend != "py_spy" or w.meta.get("status") != "complete":
            continue
        if run_id and w.meta.get("run_id") and w.meta["run_id"] != run_id:
            continue
        try:
            n, info = _add_worker(trace, w)
        except Exception as exc:  # noqa: BLE001 - one bad report never stops the merge
            warnings.append(f"py-spy report {w.report.name}: not placed ({type(exc).__name__}: {exc})")
            continue
        added += n
        placed.append(info)
        warnings += info.pop("warnings")
    if placed:
        other["system_tracks"] = placed
    return added


def _add_worker(trace: dict, w: SystemWorker) -> tuple[int, dict]:
    spy = read_pyspy(w.report)
    proc = find_process(trace, w.host, w.pid if w.pid is not None else next(iter(spy.pids), None))
    notes: list[str] = [f"{w.report.name}: {p}" for p in spy.problems[:3]]
    pid = proc.get("pid") if proc else _new_process(trace, w)
    if proc is None:
        notes.append(f"{w.report.name}: worker {w.meta.get('group')}:{w.meta.get('rank')} is not on the timeline "
                     f"(its tracer was off?): placed as a process of its own, clock offset unknown")
    anchor, how, uncertainty_us = pyspy_anchor(w.meta, w.clock_marks, spy)
    align = alignment_for(anchor, proc, trace) or Alignment(0)
    windows = w.step_windows_ns()
    if windows == []:
        notes.append(f"{w.report.name}: steps {w.meta.get('steps')} were set but the worker recorded none of them "
                     f"(no IntegratedProfiler start / step?): no frame placed")
    keep = None if windows is None else [(align.wall_to_pyspy_us(a), align.wall_to_pyspy_us(b)) for a, b in windows]
    events, names = [], {}
    spans = sorted(spy.spans, key=lambda s: (s[0], s[3]))
    for start, end, fid, depth, th in spans:
        # with steps, a frame is kept only inside the listed iterations (one piece per iteration)
        pieces = [(start, end)] if keep is None else \
            [(max(start, a), min(end, b)) for a, b in keep if min(end, b) > max(start, a)]
        tid = PYSPY_TID_BASE + th
        names.setdefault(tid, f"py-spy: thread {th}" + (" (main)" if th == 0 else ""))
        name, path, line = spy.frames[fid]
        for a, b in pieces:
            events.append({"ph": "X", "name": name, "cat": formats.CAT_PYSPY, "ts": align.pyspy_to_timeline_us(a),
                           "dur": b - a, "pid": pid, "tid": tid,
                           "args": {"file": path, "line": line, "depth": depth, "group": w.meta.get("group"),
                                    "rank": w.meta.get("rank")}})
        if len(events) >= MAX_EVENTS_PER_WORKER:
            notes.append(f"{w.report.name}: only the first {MAX_EVENTS_PER_WORKER} frames placed (limit per worker)")
            break
    meta = [{"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": n}} for tid, n in names.items()]
    trace.setdefault("traceEvents", []).extend(meta + events)
    return len(events), {"group": w.meta.get("group"), "rank": w.meta.get("rank"), "pid": pid,
                         "report": w.report.name, "events": len(events), "cut_to_steps": w.meta.get("steps"),
                         "on_worker_process": proc is not None, "clock": how, "clock_uncertainty_us": uncertainty_us,
                         "warnings": notes}


def _new_process(trace: dict, w: SystemWorker) -> int:
    evs = trace.setdefault("traceEvents", [])
    pid = 1 + max((e.get("pid", 0) for e in evs if isinstance(e, dict) and isinstance(e.get("pid"), int)), default=0)
    evs.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
                "args": {"name": f"{w.meta.get('group')}:{w.meta.get('rank')} (py-spy)"}})
    return pid
