"""A merged timeline (a Chrome trace object, docs/formats.md) -> its RL spans: stage spans and
iteration spans, with the worker ("role:rank") each ran on, and the profiler's own spans."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from mindspeed_profiler.core import formats

from . import jsonscan


def read_timeline_runs(where: Path, files: list[Path]) -> list[tuple[str | None, dict]]:
    """[(run id, Chrome trace)] of a timeline, the latest run last: one merged file as it is, else
    every run of the segments in `where`, merged now, each on its own."""
    if files:
        events: list = []
        rest = jsonscan.load_trace(files[0], events.extend)
        rest["traceEvents"] = events
        other = rest.get("otherData") if isinstance(rest.get("otherData"), dict) else {}
        rid = other.get(formats.RUN_ID_KEY)
        return [(rid if isinstance(rid, str) else None, rest)]
    from mindspeed_profiler.analysis.timeline.merge import build_timeline, read_segments

    segs = read_segments(str(where))
    return [(rid, build_timeline(str(where), rid, segs)) for rid in segs.runs()]


MAX_TIME_US = 3.2e15       # 100 years: timestamps beyond are corrupt, whatever their origin
MAX_ITERATION = 2**53      # an iteration number a double still counts exactly


def _scalar(v):
    """A role or rank as a table can hold it: a string or an int, else its text (None stays None)."""
    if v is None or isinstance(v, str) or (isinstance(v, int) and not isinstance(v, bool) and abs(v) <= MAX_ITERATION):
        return v
    return str(v)[:200]


def _worker(e: dict, pname: dict) -> str:
    a = e.get("args") if isinstance(e.get("args"), dict) else {}
    if a.get("role") is not None and a.get("rank") is not None:
        return f"{_scalar(a['role'])}:{_scalar(a['rank'])}"
    return str(pname.get(e.get("pid"), e.get("pid")))[:200]


def rl_spans(trace: dict) -> tuple[list[dict], list[dict]]:
    """(stage spans, iteration spans) of a timeline; malformed events are skipped."""
    stages, iters, _ = timeline_spans(trace)
    return stages, iters


def timeline_spans(trace: dict) -> tuple[list[dict], list[dict], list[dict]]:
    """(stage spans, iteration spans, profiler spans) of a timeline; malformed events are skipped.
    Profiler spans (`cat: "profiler"`, e.g. profiler_export) are the profiler's own work, kept out
    of the stage spans by the runtime: {name, worker, stage, iteration, ts, dur}."""
    evs = trace.get("traceEvents") if isinstance(trace, dict) else trace
    if not isinstance(evs, list):
        raise ValueError("timeline: no traceEvents list")
    pname = {e.get("pid"): (e.get("args") or {}).get("name") for e in evs
             if isinstance(e, dict) and e.get("ph") == "M" and e.get("name") == "process_name"}
    stages, iters, prof = [], [], []
    for e in evs:
        if not isinstance(e, dict) or e.get("ph") != "X":
            continue
        cat = e.get("cat")
        if cat not in (formats.CAT_STAGE, formats.CAT_ITERATION, formats.CAT_PROFILER):
            continue
        try:
            ts, dur = float(e["ts"]), float(e.get("dur", 0.0))
        except (KeyError, TypeError, ValueError, OverflowError):
            continue
        # finite, and within a century of microseconds of the origin: anything else is corrupt
        # (1.7e308 would overflow every sum downstream)
        if not (np.isfinite(ts) and np.isfinite(dur)) or dur < 0 or abs(ts) + dur > MAX_TIME_US:
            continue
        a = e.get("args") if isinstance(e.get("args"), dict) else {}
        it = a.get("iteration")
        it = int(it) if isinstance(it, (int, float)) and not isinstance(it, bool) and np.isfinite(it) \
            and abs(it) <= MAX_ITERATION and it == int(it) else None
        if cat == formats.CAT_STAGE:
            stages.append({"stage": str(a.get("stage") or e.get("name")), "worker": _worker(e, pname),
                           "role": _scalar(a.get("role")), "rank": _scalar(a.get("rank")), "iteration": it,
                           "ts": ts, "dur": dur})
        elif cat == formats.CAT_ITERATION:
            iters.append({"iteration": it, "ts": ts, "dur": dur, "worker": _worker(e, pname)})
        else:
            prof.append({"name": str(e.get("name")), "worker": _worker(e, pname), "stage": a.get("stage"),
                         "iteration": it, "ts": ts, "dur": dur})
    return stages, iters, prof
