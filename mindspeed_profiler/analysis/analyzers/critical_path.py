"""The critical path of an iteration, from the timeline's stage spans.

There are no explicit dependencies in the trace, so this is a heuristic, stated: walking back from
the iteration end, take the span that ends last before the current point, jump to its start, and
repeat. The chain is the sequence of spans that bounds the iteration; the gaps between them are
time when no stage on the path was running (driver work, scheduling, waiting).

A span on the path that encloses other workers' spans (a driver phase around the workers' calls,
as RLinf's runner records them) names, as `inner`, the enclosed span that ends last: the worker
that held the phase up.
"""
from __future__ import annotations

from mindspeed_profiler.analysis.models.rows import Field, RowModel


def critical_path(spans: list[dict], lo: float, hi: float) -> list[dict]:
    """Greedy latest-finishing-predecessor chain inside [lo, hi] (see module doc)."""
    cand = sorted(((min(s["ts"] + s["dur"], hi), max(s["ts"], lo), i) for i, s in enumerate(spans)
                   if s["ts"] < hi and s["ts"] + s["dur"] > lo), reverse=True)
    chain, cur = [], hi
    eps = 1e-6
    while cur > lo + eps:
        best = None
        for end, start, i in cand:       # sorted by end, descending: first fit is the latest
            if end <= cur + eps and start < cur - eps:
                if best is None or (end == best[0] and start < best[1]):
                    best = (end, start, i)
                elif end < best[0]:
                    break
        if best is None:
            break
        end, start, i = best
        s = spans[i]
        link = CRITICAL_PATH.row(stage=s["stage"], worker=s["worker"], start_us=start, dur_us=end - start,
                                 wait_before_end_us=cur - end)
        inner = _latest_enclosed(spans, s)
        if inner is not None:
            link["inner"] = CRITICAL_PATH.part("inner", stage=inner["stage"], worker=inner["worker"], dur_us=inner["dur"])
        chain.append(link)
        cur = start
    chain.reverse()
    return chain


def _latest_enclosed(spans: list[dict], outer: dict) -> dict | None:
    """The span of another worker inside `outer` that ends last, or None."""
    lo, hi = outer["ts"], outer["ts"] + outer["dur"]
    inside = [s for s in spans if s["worker"] != outer["worker"] and s["ts"] >= lo and s["ts"] + s["dur"] <= hi]
    return max(inside, key=lambda s: (s["ts"] + s["dur"], -s["ts"])) if inside else None


def path_text(chain: list[dict], arrow: str = " -> ") -> str:
    """The chain as one line, stage@worker joined by arrows (analysis.db, the terminal, report.html)."""
    return arrow.join(f"{p['stage']}@{p['worker']}" for p in chain)


def _links(summary: dict):
    for it in (summary.get("timeline") or {}).get("iterations") or []:
        for k, p in enumerate(it.get("critical_path") or []):
            yield None, None, {**p, "iteration": it.get("iteration"), "position": k}


CRITICAL_PATH = RowModel(
    "critical_path", "span on an iteration's critical path (a stated heuristic: the module doc)",
    "timeline.iterations[*].critical_path[*]", table="critical_path", method="critical_path", per_capture=False,
    legacy=("inner",), select=_links, fields=(
        Field("iteration", "iteration", "the iteration", computed=True),
        Field("position", "count", "0 for the first span of the chain", computed=True),
        Field("stage", "text", "the span's stage"),
        Field("worker", "text", "its worker (role:rank)"),
        Field("start_us", "us", "its start inside the iteration, from the timeline's t0_us"),
        Field("dur_us", "us", "its duration inside the iteration"),
        Field("wait_before_end_us", "us", "the gap after it (to the next span on the path, or the iteration end)"),
        Field("inner_stage", "text", "a span of another worker enclosed by it that ends last: its stage",
              key=("inner", "stage")),
        Field("inner_worker", "text", "that span's worker", key=("inner", "worker")),
        Field("inner_dur_us", "us", "that span's duration", key=("inner", "dur_us")),
    ))
