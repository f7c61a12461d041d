"""The training steps of a capture: ProfilerStep#N ranges (torch, torch_npu trace_view) or the
rows of torch_npu's step_trace_time.csv, each with its device busy time."""
from __future__ import annotations

from .. import intervals
from .classify import ClassifiedTrace

import numpy as np


def trace_steps(ct: ClassifiedTrace) -> list[dict]:
    """One row per ProfilerStep#N range, in time order: step, start_us (absolute), dur_us and
    device_busy_us (the device time covered inside the step; None without device activity)."""
    ev, ts, end = ct.ev, ct.ts, ct.end
    si = np.flatnonzero(ct.is_step)
    si = si[np.argsort(ts[si], kind="stable")]
    dev_any = ct.m["device"]
    busy = intervals.covered_in_windows(ts[dev_any], end[dev_any], ts[si], end[si]) if dev_any.any() else None
    return [{"step": int(ct.step_num[ev.name[i]]), "start_us": ev.t0_us + float(ts[i]), "dur_us": float(ct.dur[i]),
             "device_busy_us": float(busy[k]) if busy is not None else None} for k, i in enumerate(si)]


def steps_from_step_trace(rows: list[dict]) -> list[dict]:
    """Steps from step_trace_time.csv rows: the step's time and the device busy part of it
    (computing + exposed communication)."""
    return [{"step": r["step"], "dur_us": r["dur_us"],
             "device_busy_us": r.get("computing_us", 0.0) + r.get("communication_exposed_us", 0.0)}
            for r in rows]
