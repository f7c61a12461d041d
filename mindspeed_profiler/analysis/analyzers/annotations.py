"""User ranges (mstx, record_function, our markers) of a trace by total time."""
from __future__ import annotations

import numpy as np

from mindspeed_profiler.analysis.models.rows import Field, RowModel, each_capture, listed
from mindspeed_profiler.analysis.analyzers.grouping import group_sum, top
from .classify import ClassifiedTrace


def top_annotations(ct: ClassifiedTrace, top_n: int) -> list[dict]:
    """name, count, total_us, mean_us, max_us per range name (ProfilerStep ranges excluded), on the
    host; device_us: the duration of the range's device-side copies (Kineto's gpu_user_annotation,
    the time from its first to its last kernel), never counted as calls of their own."""
    ev = ct.ev
    nn = len(ev.names)
    amask = ct.m["annotation"] & ~ct.is_step
    an = ev.name[amask]
    acnt = np.bincount(an, minlength=nn)
    atot = group_sum(an, ct.dur[amask], nn)
    amax = np.zeros(nn)
    np.maximum.at(amax, an, ct.dur[amask])
    dmask = ct.m["device_annotation"]
    dtot = group_sum(ev.name[dmask], ct.dur[dmask], nn)
    row = ANNOTATIONS.row
    return top([row(name=str(ev.names[i]), count=int(acnt[i]), total_us=float(atot[i]), mean_us=float(atot[i] / acnt[i]),
                    max_us=float(amax[i]), device_us=float(dtot[i])) for i in np.flatnonzero(acnt)], "total_us", top_n)


ANNOTATIONS = RowModel("annotations", "range name of a capture (its top ones by total time)",
                       "captures[*].annotations[*]", table="annotations", method="annotations",
                       select=each_capture(listed("annotations")), fields=(
    Field("name", "text", "the range (mstx, record_function, our markers)"),
    Field("count", "count", "host calls"),
    Field("total_us", "us", "summed duration on the host"),
    Field("mean_us", "us", "total / count"),
    Field("max_us", "us", "the longest call"),
    Field("device_us", "us", "its device-side copies (never counted as calls)"),
))
