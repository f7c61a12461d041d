"""Everything the analyzers say about one Chrome / Kineto trace (torch.profiler, or torch_npu's
trace_view.json), as the per-capture fields of summary.json."""
from __future__ import annotations

from ..parsing.events import Events
from .annotations import top_annotations
from .breakdown import trace_breakdown
from .classify import classified
from .kernels import trace_kernels
from .ops import op_rows, top_ops
from .steps import trace_steps


def summarise(ev: Events, top_n: int = 20) -> dict:
    """n_events..., start_us, wall_us (first event start to last event end, profiler bookkeeping
    excluded), steps, device, top_ops, top_ops_by_device, top_kernels, annotations."""
    ct = classified(ev)
    keep = ~ct.m["skip"]
    out: dict = {"n_events": int(ev.n_raw), "n_complete_events": int(len(ev)),
                 "n_bad_events": int(ev.n_bad), "t0_us": ev.t0_us}
    if not keep.any():
        out.update(wall_us=0.0, start_us=None, steps=[], device=None, top_ops=[], top_kernels=[],
                   annotations=[])
        return out
    start = float(ct.ts[keep].min())
    out["start_us"] = ev.t0_us + start
    out["wall_us"] = float(ct.end[keep].max()) - start
    out["steps"] = trace_steps(ct)
    out["device"] = trace_breakdown(ct)
    out.update(top_ops(op_rows(ct), top_n))
    out["top_kernels"] = trace_kernels(ct, top_n)
    out["annotations"] = top_annotations(ct, top_n)
    return out
