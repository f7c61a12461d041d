"""User ranges (mstx, record_function, our markers) of a trace by total time."""
from __future__ import annotations

import numpy as np

from ._rows import group_sum, top
from .classify import ClassifiedTrace


def top_annotations(ct: ClassifiedTrace, top_n: int) -> list[dict]:
    """name, count, total_us, mean_us, max_us per range name (ProfilerStep ranges excluded)."""
    ev = ct.ev
    nn = len(ev.names)
    amask = ct.m["annotation"] & ~ct.is_step
    an = ev.name[amask]
    acnt = np.bincount(an, minlength=nn)
    atot = group_sum(an, ct.dur[amask], nn)
    amax = np.zeros(nn)
    np.maximum.at(amax, an, ct.dur[amask])
    return top([{"name": str(ev.names[i]), "count": int(acnt[i]), "total_us": float(atot[i]),
                 "mean_us": float(atot[i] / acnt[i]), "max_us": float(amax[i])}
                for i in np.flatnonzero(acnt)], "total_us", top_n)
