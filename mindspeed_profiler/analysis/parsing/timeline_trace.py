"""A merged timeline (a Chrome trace object, docs/formats.md) -> its RL spans: stage spans and
iteration spans, with the worker ("role:rank") each ran on."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from mindspeed_profiler import formats

from . import jsonscan


def read_timeline(where: Path, files: list[Path]) -> dict:
    """The Chrome trace of a timeline: the merged file when there is one, else merged now from the
    segments in `where`."""
    if files:
        events: list = []
        rest = jsonscan.load_trace(files[0], events.extend)
        rest["traceEvents"] = events
        return rest
    from ..merge import build_timeline

    return build_timeline(str(where))


def _worker(e: dict, pname: dict) -> str:
    a = e.get("args") if isinstance(e.get("args"), dict) else {}
    if a.get("role") is not None and a.get("rank") is not None:
        return f"{a['role']}:{a['rank']}"
    return str(pname.get(e.get("pid"), e.get("pid")))


def rl_spans(trace: dict) -> tuple[list[dict], list[dict]]:
    """(stage spans, iteration spans) of a timeline; malformed events are skipped."""
    evs = trace.get("traceEvents") if isinstance(trace, dict) else trace
    if not isinstance(evs, list):
        raise ValueError("timeline: no traceEvents list")
    pname = {e.get("pid"): (e.get("args") or {}).get("name") for e in evs
             if isinstance(e, dict) and e.get("ph") == "M" and e.get("name") == "process_name"}
    stages, iters = [], []
    for e in evs:
        if not isinstance(e, dict) or e.get("ph") != "X":
            continue
        cat = e.get("cat")
        if cat not in (formats.CAT_STAGE, formats.CAT_ITERATION):
            continue
        try:
            ts, dur = float(e["ts"]), float(e.get("dur", 0.0))
        except (KeyError, TypeError, ValueError):
            continue
        if not (np.isfinite(ts) and np.isfinite(dur)) or dur < 0:
            continue
        a = e.get("args") if isinstance(e.get("args"), dict) else {}
        it = a.get("iteration")
        it = int(it) if isinstance(it, (int, float)) and not isinstance(it, bool) and np.isfinite(it) else None
        if cat == formats.CAT_STAGE:
            stages.append({"stage": str(a.get("stage") or e.get("name")), "worker": _worker(e, pname),
                           "role": a.get("role"), "rank": a.get("rank"), "iteration": it,
                           "ts": ts, "dur": dur})
        else:
            iters.append({"iteration": it, "ts": ts, "dur": dur, "worker": _worker(e, pname)})
    return stages, iters
