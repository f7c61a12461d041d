"""The RL view of a merged timeline: time per stage per iteration, stage overlap, idle time per
worker, the critical path of each iteration, and the stage x worker table.

Input: a Chrome trace object (docs/formats.md): `cat: "stage"` spans name the stage and carry
args.role / rank / iteration; `cat: "iteration"` spans bound iterations. Without iteration spans,
an iteration is the extent of the stage spans that carry its number. `cat: "profiler"` spans (the
capture export) are counted per iteration (profiler_us), never as a stage.
"""
from __future__ import annotations

from bisect import bisect_left

import numpy as np

from mindspeed_profiler.analysis.analyzers import intervals
from ..parsing.timeline_trace import timeline_spans
from mindspeed_profiler.analysis.models.rows import Field, RowModel
from .critical_path import critical_path, path_text
from .crossrank import spread
from .grouping import median

MAX_GANTT_SPANS = 4000


def _iteration_windows(stages: list[dict], iters: list[dict]) -> list[dict]:
    win: dict[int, list[float]] = {}
    for s in iters:   # several workers may each record the iteration: take the outer extent
        if s["iteration"] is None:
            continue
        w = win.setdefault(s["iteration"], [s["ts"], s["ts"] + s["dur"]])
        w[0], w[1] = min(w[0], s["ts"]), max(w[1], s["ts"] + s["dur"])
    if not win:
        for s in stages:
            if s["iteration"] is None:
                continue
            w = win.setdefault(s["iteration"], [s["ts"], s["ts"] + s["dur"]])
            w[0], w[1] = min(w[0], s["ts"]), max(w[1], s["ts"] + s["dur"])
    return [{"iteration": k, "start": v[0], "end": v[1]} for k, v in sorted(win.items())]


def _profiler_time(prof: list[dict], lo: float, hi: float, st: np.ndarray, en: np.ndarray) -> tuple[float, float]:
    """(time covered by profiler spans inside [lo, hi], the part of it when no stage span runs)."""
    ps = np.array([p["ts"] for p in prof if p["ts"] < hi and p["ts"] + p["dur"] > lo])
    if not len(ps):
        return 0.0, 0.0
    pe = np.array([p["ts"] + p["dur"] for p in prof if p["ts"] < hi and p["ts"] + p["dur"] > lo])
    ps, pe = np.maximum(ps, lo), np.minimum(pe, hi)
    covered = intervals.union_length(ps, pe)
    # profiler time under no stage = union(profiler, stages) - union(stages)
    alone = intervals.union_length(np.concatenate([ps, st]), np.concatenate([pe, en])) - intervals.union_length(st, en)
    return covered, max(0.0, alone)


def stage_spans(trace: dict) -> list[dict]:
    """Every stage span of a timeline (not only the Gantt's first MAX_GANTT_SPANS), start_us relative
    to the same t0_us as analyse_timeline's: {iteration, stage, worker, role, rank, start_us, dur_us}."""
    stages, iters, _ = timeline_spans(trace)
    if not stages:
        return []
    t0 = min([s["ts"] for s in stages] + [s["ts"] for s in iters])
    return [{"iteration": s["iteration"], "stage": s["stage"], "worker": s["worker"], "role": s["role"],
             "rank": s["rank"], "start_us": s["ts"] - t0, "dur_us": s["dur"]}
            for s in sorted(stages, key=lambda s: s["ts"])]


def analyse_timeline(trace: dict) -> dict:
    stages, iters, prof = timeline_spans(trace)
    for i, s in enumerate(stages):   # original order, so that ties resolve as before
        s["_i"] = i
    if not stages and not iters:
        # a valid timeline without RL markers (e.g. only user spans): nothing per stage to say
        return {"n_stage_spans": 0, "n_iterations": 0, "t0_us": None, "iterations": [], "stage_worker": [],
                "gantt": [], "gantt_truncated": False,
                "warning": "no 'stage' or 'iteration' spans (cat) in the timeline: no per-stage analysis"}
    t0 = min([s["ts"] for s in stages] + [s["ts"] for s in iters])
    windows = _iteration_windows(stages, iters)
    per_iter = []
    all_workers = sorted({s["worker"] for s in stages})
    # index the spans once (a scan of every span per iteration made long runs quadratic):
    # by iteration number, and the ones without a number by start time
    by_iter: dict = {}
    loose = []
    for s in stages:
        if s["iteration"] is None:
            loose.append(s)
        else:
            by_iter.setdefault(s["iteration"], []).append(s)
    loose.sort(key=lambda s: s["ts"])
    loose_ts = [s["ts"] for s in loose]
    loose_maxdur = max((s["dur"] for s in loose), default=0.0)
    for w in windows:
        lo, hi = w["start"], w["end"]
        cand = by_iter.get(w["iteration"], []) + loose[bisect_left(loose_ts, lo - loose_maxdur):bisect_left(loose_ts, hi)]
        inside = sorted((s for s in cand if s["ts"] < hi and s["ts"] + s["dur"] > lo), key=lambda s: s["_i"])
        st = np.array([s["ts"] for s in inside]) if inside else np.empty(0)
        en = np.array([s["ts"] + s["dur"] for s in inside]) if inside else np.empty(0)
        st, en = np.maximum(st, lo), np.minimum(en, hi)
        by_stage: dict[str, dict] = {}
        for name in sorted({s["stage"] for s in inside}):
            m = np.array([s["stage"] == name for s in inside], dtype=bool)
            by_stage[name] = TIMELINE_STAGES.row(
                total_us=float(np.sum(en[m] - st[m])), wall_us=intervals.union_length(st[m], en[m]), count=int(m.sum()),
                first_start_us=float(st[m].min() - lo), last_end_us=float(en[m].max() - lo))
        covered = intervals.union_length(st, en)
        # time where two or more different stages run at once
        overlap = intervals.multi_covered_length(
            [intervals.merge(st[m], en[m]) for m in (np.array([s["stage"] == name for s in inside], dtype=bool)
                                                     for name in by_stage)], 2)
        idle = {}
        for wk in all_workers:   # a worker with no stage span in the iteration is idle all of it
            m = np.array([s["worker"] == wk for s in inside], dtype=bool)
            idle[wk] = (hi - lo) - intervals.union_length(st[m], en[m])
        prof_us, prof_alone_us = _profiler_time(prof, lo, hi, st, en)
        per_iter.append(ITERATIONS.row(iteration=w["iteration"], start_us=lo - t0, dur_us=hi - lo,
                                       stages=by_stage, stage_covered_us=covered, overlap_us=overlap,
                                       no_stage_us=(hi - lo) - covered, profiler_us=prof_us,
                                       profiler_no_stage_us=prof_alone_us, idle_per_worker_us=idle,
                                       critical_path=critical_path(inside, lo, hi)))
    # stage x worker table over the whole timeline
    table: dict[tuple, dict] = {}
    durs: dict[tuple, list] = {}   # each row's span durations (kept out of the row)
    for s in stages:
        key = (s["stage"], s["worker"])
        r = table.get(key)
        if r is None:
            r = table[key] = STAGE_WORKER.row(stage=s["stage"], worker=s["worker"], role=s["role"], rank=s["rank"],
                                              count=0, total_us=0.0)
            durs[key] = []
        r["count"] += 1
        r["total_us"] += s["dur"]
        durs[key].append(s["dur"])
    for key, r in table.items():
        r["mean_us"] = r["total_us"] / r["count"]
        # the median resists the one-off slow calls (first iteration's warm-up, a profiled call)
        r["median_us"] = median(durs[key])
        r["spread_us"] = spread(durs[key])   # the noise slow-rank flags must exceed
    gantt = sorted(stages, key=lambda s: s["ts"])[:MAX_GANTT_SPANS]
    return {
        "n_stage_spans": len(stages), "n_iterations": len(windows), "t0_us": t0,
        "iterations": per_iter,
        "stage_worker": sorted(table.values(), key=lambda r: (r["stage"], str(r["worker"]))),
        "gantt": [{"stage": s["stage"], "worker": s["worker"], "iteration": s["iteration"],
                   "start_us": s["ts"] - t0, "dur_us": s["dur"]} for s in gantt],
        "gantt_truncated": len(stages) > MAX_GANTT_SPANS,
    }


# -- rows (rows.py): summary.json timeline (the first ok timeline's analysis); analysis.db timeline_*


def _iterations(summary: dict) -> list[dict]:
    return (summary.get("timeline") or {}).get("iterations") or []


def _iteration_rows(summary: dict):
    return ((None, None, {**it, "critical_path": path_text(it.get("critical_path") or [])}) for it in _iterations(summary))


def _stage_rows(summary: dict):
    return ((None, None, {**v, "iteration": it.get("iteration"), "stage": name})
            for it in _iterations(summary) for name, v in (it.get("stages") or {}).items())


def _idle_rows(summary: dict):
    return ((None, None, {"iteration": it.get("iteration"), "worker": w, "idle_us": v})
            for it in _iterations(summary) for w, v in (it.get("idle_per_worker_us") or {}).items())


_ITERATION = Field("iteration", "iteration", "the iteration (1-based)")
_IN_ITERATION = Field("iteration", "iteration", "the iteration", computed=True)
_START = Field("start_us", "us", "from the timeline's t0_us")
_STAGE = Field("stage", "text", "the stage")
_WORKER = Field("worker", "text", "role:rank")
_ROLE = Field("role", "text", "the worker's role")
_RANK = Field("rank", "rank", "the worker's rank")
_COUNT = Field("count", "count", "spans")
_TOTAL = Field("total_us", "us", "summed span time")

ITERATIONS = RowModel(
    "iterations", "iteration of the timeline", "timeline.iterations[*]", table="timeline_iterations",
    method="iterations", per_capture=False, primary="iteration", conflict="REPLACE", open_row=True,
    holds=("stages", "idle_per_worker_us", "critical_path"), select=_iteration_rows, fields=(
        _ITERATION, _START, Field("dur_us", "us", "the iteration's duration"),
        Field("stage_covered_us", "us", "time covered by any stage span"),
        Field("overlap_us", "us", "time with two or more different stages running"),
        Field("no_stage_us", "us", "dur_us - stage_covered_us"),
        Field("profiler_us", "us", "time covered by the profiler's own spans (the capture export)"),
        Field("profiler_no_stage_us", "us", "the part of it when no stage runs"),
        Field("critical_path", "text", "the chain as text, stage@worker -> ... (its rows: critical_path)",
              computed=True),
    ))
TIMELINE_STAGES = RowModel(
    "timeline_stages", "(iteration, stage)", "timeline.iterations[*].stages{stage: ...}", table="timeline_stages",
    method="stages", per_capture=False, select=_stage_rows, fields=(
        _IN_ITERATION, Field("stage", "text", "the stage", computed=True), _TOTAL,
        Field("wall_us", "us", "the union of its spans"), _COUNT,
        Field("first_start_us", "us", "its first span's start, from the iteration's"),
        Field("last_end_us", "us", "its last span's end, from the iteration's start"),
    ))
TIMELINE_IDLE = RowModel(
    "timeline_idle", "(iteration, worker)", "timeline.iterations[*].idle_per_worker_us{worker: us}",
    table="timeline_idle", method="idle", per_capture=False, select=_idle_rows, fields=(
        _IN_ITERATION, Field("worker", "text", "role:rank (every worker of the timeline)", computed=True),
        Field("idle_us", "us", "the iteration minus the worker's stage union", computed=True),
    ))
STAGE_WORKER = RowModel(
    "stage_worker", "(stage, worker) of the timeline", "timeline.stage_worker[*]", table="stage_worker",
    method="stage_worker", per_capture=False,
    select=lambda summary: ((None, None, r) for r in (summary.get("timeline") or {}).get("stage_worker") or []),
    fields=(_STAGE, _WORKER, _ROLE, _RANK, _COUNT, _TOTAL, Field("mean_us", "us", "total / count"),
            Field("median_us", "us", "the median span (what slow ranks compare)"),
            Field("spread_us", "us", "1.4826 x the spans' median absolute deviation")))
SPANS = RowModel(
    "spans", "stage span of the timeline (every one, every run's)",
    "analysis.db only (summary.json keeps the first spans in timeline.gantt)", table="spans", per_capture=False,
    select=None, fields=(
        Field("run_id", "text", "the run"), Field("iteration", "iteration", "the iteration (args.iteration)"),
        _STAGE, _WORKER, _ROLE, _RANK, _START, Field("dur_us", "us", "its duration")))
