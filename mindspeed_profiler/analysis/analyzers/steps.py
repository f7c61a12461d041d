"""The training steps of a trace: its ProfilerStep#N ranges (torch, torch_npu trace_view, the db
export read into the same shape), each with its device busy time (Ascend captures without host
steps take theirs from the step breakdown: step_breakdown.py)."""
from __future__ import annotations

import numpy as np

from mindspeed_profiler.analysis.analyzers import intervals
from mindspeed_profiler.analysis.models.rows import Field, RowModel, each_capture, listed
from .classify import ClassifiedTrace


def trace_steps(ct: ClassifiedTrace) -> list[dict]:
    """One row per host ProfilerStep#N range, in time order: step, start_us (absolute), dur_us,
    device_busy_us (the device time covered inside the step; None without device activity) and
    device_range_us (the step's device-side copy, Kineto's gpu_user_annotation: from its first to
    its last kernel; None without one)."""
    ev, ts, end = ct.ev, ct.ts, ct.end
    si = np.flatnonzero(ct.is_step)
    si = si[np.argsort(ts[si], kind="stable")]
    dev_any = ct.m["device"]
    busy = intervals.covered_in_windows(ts[dev_any], end[dev_any], ts[si], end[si]) if dev_any.any() else None
    device_range: dict[int, float] = {}
    for i in np.flatnonzero(ct.m["device_annotation"] & (ct.step_num[ev.name] >= 0)):
        n = int(ct.step_num[ev.name[i]])
        device_range[n] = device_range.get(n, 0.0) + float(ct.dur[i])
    row = STEPS.row
    return [row(step=int(ct.step_num[ev.name[i]]), start_us=ev.t0_us + float(ts[i]), dur_us=float(ct.dur[i]),
                device_busy_us=float(busy[k]) if busy is not None else None,
                device_range_us=device_range.get(int(ct.step_num[ev.name[i]]))) for k, i in enumerate(si)]


STEPS = RowModel("steps", "step of a capture", "captures[*].steps[*]", table="steps", method="steps",
                 select=each_capture(listed("steps")), fields=(
    Field("step", "step", "the step number (INTEGER; a label that is not a number stays text)"),
    Field("start_us", "us", "absolute start, us since the epoch where the trace says so"),
    Field("dur_us", "us", "the host step's duration (Ascend without host steps: the breakdown's stage time)"),
    Field("device_busy_us", "us", "device time covered inside the step"),
    Field("device_range_us", "us", "the step's device-side copy (Kineto gpu_user_annotation: first to last kernel)"),
))
