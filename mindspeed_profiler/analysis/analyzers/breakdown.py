"""Where the device time went (all in microseconds).

Device busy: time covered by at least one device activity (kernel, memcpy/memset, Ascend hardware
task, HCCL), split exclusively: compute, then communication not overlapped by compute, then memory
copy not overlapped by either; idle = window - busy, where the window runs from the first to the
last device activity. So busy = compute + communication_exposed + memcpy_exposed, and
busy + idle = window.
"""
from __future__ import annotations

import numpy as np

from mindspeed_profiler.analysis.analyzers import intervals
from mindspeed_profiler.analysis.models.rows import Field, RowModel, block, each_capture
from .classify import ClassifiedTrace


def device_breakdown(ts: np.ndarray, end: np.ndarray, comp: np.ndarray, comm: np.ndarray,
                     mem: np.ndarray, window: tuple[float, float] | None = None) -> dict | None:
    """Exclusive split of device time (see module doc); None when there is no device activity."""
    dev = comp | comm | mem
    if not dev.any():
        return None
    s, e = ts[dev], end[dev]
    lo, hi = (float(s.min()), float(e.max())) if window is None else window

    def u(mask):
        a, b = intervals.clip(ts[mask], end[mask], lo, hi)
        return intervals.union_length(a, b)
    c = u(comp)
    k = u(comm)
    ck = u(comp | comm)
    busy = u(dev)
    return BREAKDOWN.row(window_us=hi - lo, busy_us=busy, compute_us=c, communication_us=k,
                         communication_exposed_us=ck - c, communication_overlapped_us=c + k - ck,
                         memcpy_exposed_us=busy - ck, idle_us=(hi - lo) - busy, n_activities=int(dev.sum()))


def trace_breakdown(ct: ClassifiedTrace) -> dict | None:
    m = ct.m
    return device_breakdown(ct.ts, ct.end, m["compute"], m["comm"], m["memcpy"])


# summary.json captures[*].device; analysis.db breakdown (and these names in captures)
DEVICE_FIELDS = (
    Field("window_us", "us", "first to last device activity (Ascend: the steps' computing + not overlapped + free)"),
    Field("busy_us", "us", "time covered by any device activity = compute + communication_exposed + memcpy_exposed"),
    Field("compute_us", "us", "time covered by compute kernels / tasks"),
    Field("communication_us", "us", "time covered by collective kernels / ops"),
    Field("communication_exposed_us", "us", "communication not overlapped by compute"),
    Field("communication_overlapped_us", "us", "communication under compute"),
    Field("memcpy_exposed_us", "us", "memory copies hidden by neither"),
    Field("idle_us", "us", "window - busy"),
    Field("n_activities", "count", "device activities"),
)
BREAKDOWN = RowModel("breakdown", "capture with device activity", "captures[*].device", table="breakdown",
                     method="breakdown", primary="capture_id", select=each_capture(block("device")),
                     fields=DEVICE_FIELDS)
