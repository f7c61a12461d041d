"""The training steps of a capture: ProfilerStep#N ranges (torch, torch_npu trace_view) or the
rows of torch_npu's step_trace_time.csv, each with its device busy time."""
from __future__ import annotations

import numpy as np

from .. import intervals
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
    return [{"step": int(ct.step_num[ev.name[i]]), "start_us": ev.t0_us + float(ts[i]), "dur_us": float(ct.dur[i]),
             "device_busy_us": float(busy[k]) if busy is not None else None,
             "device_range_us": device_range.get(int(ct.step_num[ev.name[i]]))} for k, i in enumerate(si)]


def steps_from_kernels(step_ids: list[str], ts: np.ndarray, dur: np.ndarray, base: int) -> list[dict]:
    """Steps of a capture that has only kernel_details.csv: the kernels of each Step Id, from the
    first one's start to the last one's end, and the device time they cover (rows without a Step Id
    belong to no step)."""
    out = []
    ids = np.array(step_ids, dtype=object)
    for sid in sorted({s for s in step_ids if s}, key=lambda s: (not s.isdigit(), int(s) if s.isdigit() else 0, s)):
        m = ids == sid
        lo, hi = float(ts[m].min()), float((ts[m] + dur[m]).max())
        out.append({"step": int(sid) if sid.isdigit() else sid, "start_us": base + lo, "dur_us": hi - lo,
                    "device_busy_us": intervals.union_length(ts[m], ts[m] + dur[m])})
    return out


def steps_from_step_trace(rows: list[dict]) -> list[dict]:
    """Steps from step_trace_time.csv rows: the step's time and the device busy part of it
    (computing + exposed communication)."""
    return [{"step": r["step"], "dur_us": r["dur_us"],
             "device_busy_us": r.get("computing_us", 0.0) + r.get("communication_exposed_us", 0.0)}
            for r in rows]
