"""Everything the analyzers say about one Chrome / Kineto trace (torch.profiler, or torch_npu's
trace_view.json), as the per-capture fields of summary.json."""
from __future__ import annotations

import numpy as np

from ..parsing.events import Events
from .annotations import ANNOTATIONS, top_annotations
from .breakdown import BREAKDOWN, trace_breakdown
from typing import Callable

from .classify import ClassifiedTrace, classified
from .collective_bandwidth import COLLECTIVE_BANDWIDTH, trace_collective_bandwidth
from .grouping import distinct
from .communication import COMMUNICATION, collective_call, communication_summary, device_communication, host_communication
from .idle_causes import trace_idle_causes
from .kernels import KERNEL_TOTALS, KERNELS, kernel_rows, kernel_totals, top_kernels
from .ops import OP_TOTALS, op_rows, op_totals, top_ops
from .steps import STEPS, trace_steps
from .stragglers import collectives_block


def summarise(ev: Events, top_n: int = 20) -> dict:
    """n_events..., start_us, wall_us (first event start to last event end, profiler bookkeeping
    excluded), steps, device, communication, top_ops, top_ops_by_device, top_kernels, annotations,
    op_totals / kernel_totals (every name, for compare) and warnings."""
    return summarise_classified(classified(ev), top_n)


def summarise_classified(ct: ClassifiedTrace, top_n: int = 20,
                         ops_of: Callable[[ClassifiedTrace], list[dict]] = op_rows) -> dict:
    """summarise() of a trace already classified (the Ascend input reuses the classification);
    `ops_of(ct)` gives op_rows(ct) (inputs/kineto.py: from a forked child that computed them meanwhile)."""
    ev = ct.ev
    keep = ~ct.m["skip"]
    out: dict = {"n_events": int(ev.n_raw), "n_complete_events": int(len(ev)),
                 "n_bad_events": int(ev.n_bad), "t0_us": ev.t0_us, "warnings": _warnings(ct)}
    if not keep.any():
        out.update(wall_us=0.0, start_us=None, steps=[], device=None, communication=None, top_ops=[],
                   top_kernels=[], annotations=[], op_totals=[], kernel_totals=[])
        return out
    start = float(ct.ts[keep].min())
    out["start_us"] = ev.t0_us + start
    out["wall_us"] = float(ct.end[keep].max()) - start
    STEPS.put(out, trace_steps(ct))
    BREAKDOWN.put(out, trace_breakdown(ct))
    out.update(trace_idle_causes(ct))
    block = collectives_block(ct)
    if block is not None:
        out["collective_kernels"] = block
    bandwidth = trace_collective_bandwidth(ct)
    if bandwidth:
        COLLECTIVE_BANDWIDTH.put(out, bandwidth)
    kernels = kernel_rows(ct)
    ops = ops_of(ct)
    annotations = top_annotations(ct, top_n)
    ANNOTATIONS.put(out, annotations)
    COMMUNICATION.put(out, communication(ct, out["device"], out["wall_us"], ops + annotations, kernels, top_n))
    out.update(top_ops(ops, top_n))
    KERNELS.put(out, top_kernels(kernels, top_n))
    OP_TOTALS.put(out, op_totals(ops))
    KERNEL_TOTALS.put(out, kernel_totals(kernels))
    return out


def communication(ct: ClassifiedTrace, device: dict | None, wall_us: float, host_rows: list[dict], kernels: list[dict],
                  top_n: int) -> dict | None:
    """Communication on the device (collective kernels: total, exposed, overlapped, share of busy)
    and on the host (collective calls such as gloo:all_reduce: the time they cover, share of the
    wall time), and the collectives by time (host_rows: ops and ranges, {name, count, total_us})."""
    hc = ct.m["host_comm"]
    host_names = {str(ct.ev.names[i]) for i in distinct(ct.ev.name[hc])}
    calls = collective_calls(kernels)
    calls += [collective_call(r["name"], "host", r["count"], r["total_us"]) for r in host_rows if r["name"] in host_names]
    return communication_summary(device_communication(device), host_communication(ct.ts[hc], ct.end[hc], wall_us),
                                 calls, top_n)


def collective_calls(kernels: list[dict]) -> list[dict]:
    """The device collectives among kernel rows, as `communication.top` rows."""
    return [collective_call(r["name"], "device", r["count"], r["total_us"])
            for r in kernels if r.get("class") == "communication"]


RECOGNISED = ("host_op", "annotation", "runtime", "device", "device_annotation", "profiler_range")


def _warnings(ct: ClassifiedTrace) -> list[str]:
    out = []
    ev, m = ct.ev, ct.m
    if len(ev) and not any(m[k].any() for k in RECOGNISED):
        # a trace from a tool or torch release whose categories we do not know: say what was there
        cats: dict = {}
        for c in ev.cat:
            cats[c] = cats.get(c, 0) + 1
        seen = ", ".join(f"{ev.cats[c]!r} x{n}" for c, n in sorted(cats.items(), key=lambda kv: -kv[1])[:8])
        procs = sorted({str(v) for v in ev.process_names.values()})[:6]
        out.append(f"{len(ev)} complete event(s), none of a kind this analysis knows (host op, annotation, runtime "
                   f"call, device activity): categories seen: {seen}" + (f"; processes: {', '.join(procs)}" if procs else "")
                   + ". No steps, ops, kernels or device time can be reported")
    n = int(ct.m["profiler_range"].sum())
    if n:
        out.append(f"{n} kernel(s) recorded by the CUDA range profiler (cat cuda_profiler_range): their durations "
                   "are placeholders, so this capture reports no device time")
    if ct.ev.n_bad:
        out.append(f"{ct.ev.n_bad} event(s) without a usable time or duration (or unpaired B/E) were left out")
    return out
