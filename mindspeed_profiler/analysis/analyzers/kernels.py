"""Device kernels by total time: from a Kineto / trace_view trace, or torch_npu's kernel_details.csv
(the db export's compute tasks and ops come in the same shape)."""
from __future__ import annotations

import numpy as np

from mindspeed_profiler.analysis.results.outputs import each_capture_totals
from mindspeed_profiler.analysis.models.rows import Field, RowModel, each_capture, listed
from mindspeed_profiler.analysis.analyzers.grouping import group_sum, top
from .classify import ClassifiedTrace


def kernel_rows(ct: ClassifiedTrace) -> list[dict]:
    """name, count, total_us and class (compute / communication / memcpy) of every device activity name."""
    ev, m = ct.ev, ct.m
    nn = len(ev.names)
    dmask = m["device"]
    kn = ev.name[dmask]
    kcnt = np.bincount(kn, minlength=nn)
    ktot = group_sum(kn, ct.dur[dmask], nn)
    kcls = np.full(nn, "compute", dtype=object)
    kcls[ev.name[m["comm"]]] = "communication"
    kcls[ev.name[m["memcpy"]]] = "memcpy"
    row = KERNELS.row
    return [row(name=str(ev.names[i]), count=int(kcnt[i]), total_us=float(ktot[i]), **{"class": kcls[i]})
            for i in np.flatnonzero(kcnt)]


def top_kernels(rows: list[dict], top_n: int) -> list[dict]:
    return top(rows, "total_us", top_n)


def kernel_class(is_comm: bool, is_memcpy: bool) -> str:
    return "communication" if is_comm else "memcpy" if is_memcpy else "compute"


def detail_kernels(names: list[str], types: list[str], cores: list[str], dur: np.ndarray,
                   classes: list[str]) -> list[dict]:
    """kernel_details.csv rows aggregated by name (type, core and class of the first row), largest first."""
    agg: dict[str, dict] = {}
    for n, t, c, d, k in zip(names, types, cores, dur, classes):
        a = agg.get(n)
        if a is None:   # ("class" is a Python keyword)
            a = agg[n] = KERNELS.row(name=n, type=t, core=c, count=0, total_us=0.0, **{"class": k})
        a["count"] += 1
        a["total_us"] += float(d)
    return sorted(agg.values(), key=lambda a: -a["total_us"])


def kernel_types(types: list[str], dur: np.ndarray, top_n: int) -> list[dict]:
    """Total device time per kernel type (AI_CORE, AI_VECTOR_CORE, HCCL, ...)."""
    by_type: dict[str, float] = {}
    for t, d in zip(types, dur):
        by_type[t] = by_type.get(t, 0.0) + float(d)
    return sorted(({"type": k, "total_us": v} for k, v in by_type.items()), key=lambda a: -a["total_us"])[:top_n]


def kernel_totals(rows: list[dict]) -> list[list]:
    """Every kernel name's totals, compact: [name, count, total_us, class] (compare needs them all:
    a change below one side's top-N cut is still a change)."""
    return [KERNEL_TOTALS.columns_row(r) for r in rows]


_KERNEL = (
    Field("name", "text", "the kernel / device task"),
    Field("count", "count", "launches"),
    Field("total_us", "us", "summed duration"),
    Field("class", "text", "compute, communication or memcpy"),
)
KERNELS = RowModel("kernels", "kernel of a capture's top list (by total time)", "captures[*].top_kernels[*]",
                   table="kernels", method="kernels", select=each_capture(listed("top_kernels")), fields=_KERNEL + (
    Field("type", "text", "Ascend kernel_details.csv: the op type"),
    Field("core", "text", "Ascend kernel_details.csv: the accelerator core"),
))
KERNEL_TOTALS = RowModel("kernel_totals", "kernel name of a capture (all of them)",
                         "capture_totals.jsonl `kernel_totals[*]` of each capture's line ([name, count, total_us, class]; "
                         "summary.json `captures[*].kernel_totals[*]` before it)", table="kernel_totals",
                         method="kernel_totals", select=each_capture_totals("kernel_totals", tuple(f.name for f in _KERNEL)),
                         fields=_KERNEL)
