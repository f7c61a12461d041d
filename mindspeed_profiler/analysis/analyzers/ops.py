"""The host ops of a trace by self time and by the device time they launched.

Self time of a host op: its duration minus the durations of its direct children on the same
thread (ops, annotations and runtime calls form one call stack per thread). Device time of an op:
the kernels launched (matched by correlation id) from runtime calls directly inside it.
"""
from __future__ import annotations

import numpy as np

from mindspeed_profiler.analysis.analyzers import intervals
from mindspeed_profiler.analysis.results.outputs import each_capture_totals
from mindspeed_profiler.analysis.models.rows import Field, RowModel, each_capture, listed
from mindspeed_profiler.analysis.analyzers.grouping import group_sum, top
from .classify import ClassifiedTrace


def op_rows(ct: ClassifiedTrace) -> list[dict]:
    """One row per op name (ProfilerStep ranges excluded): count, total_us, self_us, device_us."""
    ev, m, ts, dur = ct.ev, ct.m, ct.ts, ct.dur
    host = m["host_op"] | m["annotation"] | m["runtime"]
    hidx = np.flatnonzero(host)
    group = ev.pid[hidx].astype(np.int64) * (len(ev.tids) + 1) + ev.tid[hidx]
    selft, par = intervals.self_times(group, ts[hidx], dur[hidx])
    nn = len(ev.names)
    # device time per op: kernel -> runtime call (same correlation id) -> its parent op
    op_dev = np.zeros(nn)
    rt_local = np.flatnonzero(m["runtime"][hidx])
    kern = np.flatnonzero(m["device"] & (ev.corr >= 0))
    if len(rt_local) and len(kern):
        rt_corr = ev.corr[hidx[rt_local]]
        order = np.argsort(rt_corr)
        sc = rt_corr[order]
        pos = np.clip(np.searchsorted(sc, ev.corr[kern]), 0, len(sc) - 1)
        hit = sc[pos] == ev.corr[kern]
        launcher = rt_local[order[pos[hit]]]
        op_local = par[launcher]
        has_op = op_local >= 0
        op_local = op_local[has_op]
        is_op = m["host_op"][hidx[op_local]]
        np.add.at(op_dev, ev.name[hidx[op_local[is_op]]], dur[kern[hit][has_op][is_op]])

    ops = np.flatnonzero(m["host_op"][hidx] & ~ct.is_step[hidx])
    names = ev.name[hidx[ops]]
    cnt = np.bincount(names, minlength=nn)
    tot = group_sum(names, dur[hidx[ops]], nn)
    slf = group_sum(names, selft[ops], nn)
    row = OPS.row
    return [row(name=str(ev.names[i]), count=int(cnt[i]), total_us=float(tot[i]), self_us=float(slf[i]),
                device_us=float(op_dev[i])) for i in np.flatnonzero(cnt)]


def top_ops(rows: list[dict], top_n: int) -> dict[str, list[dict]]:
    """top_ops (by self time) and top_ops_by_device (ops that launched device work, by its time)."""
    return {"top_ops": top(rows, "self_us", top_n),
            "top_ops_by_device": top([r for r in rows if r["device_us"] > 0], "device_us", top_n)}


def op_totals(rows: list[dict]) -> list[list]:
    """Every op name's totals, compact: [name, count, total_us, self_us, device_us]."""
    return [OP_TOTALS.columns_row(r) for r in rows]


OP_FIELDS = (
    Field("name", "text", "the host op"),
    Field("count", "count", "calls"),
    Field("total_us", "us", "summed duration"),
    Field("self_us", "us", "duration minus direct children on the same thread"),
    Field("device_us", "us", "kernels launched directly from it (same correlation id)"),
)
OPS = RowModel("ops", "op of a capture's top list (by self time)", "captures[*].top_ops[*]", table="ops",
               method="top_ops", select=each_capture(listed("top_ops")), fields=OP_FIELDS)
OP_TOTALS = RowModel("op_totals", "op name of a capture (all of them)",
                     "capture_totals.jsonl `op_totals[*]` of each capture's line ([name, count, total_us, self_us, "
                     "device_us]; summary.json `captures[*].op_totals[*]` before it)", table="op_totals",
                     method="op_totals", select=each_capture_totals("op_totals", OPS.names), fields=OP_FIELDS)
