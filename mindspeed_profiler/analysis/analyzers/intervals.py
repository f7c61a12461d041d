"""Pure, vectorised interval arithmetic on numpy arrays (times in microseconds)."""
from __future__ import annotations

import numpy as np

from .grouping import distinct
from .maxtree import MaxTree

PASSES_MAX = 16   # last_holding: up to this many intervals, a pass over x each (cheaper than a binary search of 1e5 unsorted x)


def merge(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Union of intervals as disjoint, sorted (starts, ends)."""
    if len(starts) == 0:
        return np.empty(0), np.empty(0)
    order = np.argsort(starts, kind="stable")
    s = np.asarray(starts, dtype=np.float64)[order]
    e = np.maximum.accumulate(np.asarray(ends, dtype=np.float64)[order])
    # a new segment starts where an interval begins after everything before it has ended
    new = np.empty(len(s), dtype=bool)
    new[0] = True
    new[1:] = s[1:] > e[:-1]
    first = np.flatnonzero(new)
    last = np.r_[first[1:] - 1, len(s) - 1]
    return s[first], e[last]


def union_length(starts: np.ndarray, ends: np.ndarray) -> float:
    """Total time covered by at least one interval."""
    s, e = merge(starts, ends)
    return float(np.sum(e - s)) if len(s) else 0.0


def multi_covered_length(sets: list[tuple[np.ndarray, np.ndarray]], k: int = 2) -> float:
    """Time covered by at least `k` of the interval sets (each set already disjoint, e.g. merged)."""
    if len(sets) < k:
        return 0.0
    s = np.concatenate([a for a, _ in sets]) if sets else np.empty(0)
    e = np.concatenate([b for _, b in sets]) if sets else np.empty(0)
    if len(s) == 0:
        return 0.0
    t = np.r_[s, e]
    d = np.r_[np.ones(len(s)), -np.ones(len(e))]
    order = np.lexsort((d, t))          # at equal times, ends (-1) before starts: touching is not overlap
    t, d = t[order], d[order]
    depth = np.cumsum(d)
    seg = np.diff(t)
    return float(np.sum(seg[depth[:-1] >= k]))


def clip(starts: np.ndarray, ends: np.ndarray, lo: float, hi: float) -> tuple[np.ndarray, np.ndarray]:
    """Intervals cut to [lo, hi]; the empty ones dropped."""
    s = np.maximum(starts, lo)
    e = np.minimum(ends, hi)
    keep = e > s
    return s[keep], e[keep]


def parents(group: np.ndarray, starts: np.ndarray, durs: np.ndarray) -> np.ndarray:
    """Index of the innermost enclosing interval of each interval within its group (-1 = none).

    Assumes intervals of one group nest properly (true for one thread's call stack). Vectorised:
    depth = how many earlier-started intervals are still open at my start; my parent is the
    latest-started interval one level up.
    """
    n = len(starts)
    if n == 0:
        return np.empty(0, dtype=np.int64)
    # put groups side by side on one time axis so one sort handles them all
    t0 = float(np.min(starts))
    span = float(np.max(starts + durs) - t0) + 1.0
    # dense group numbers (0..G-1), so that the offsets stay small and float64 keeps sub-ns digits
    # (by sorting: np.unique(return_inverse) hashes, 14 ms on a real GPU trace's 1e5 host events)
    dense = np.searchsorted(distinct(group), group)
    s = (starts - t0) + dense.astype(np.float64) * span * 2
    # zero-length events get 0.1 ns so that they are "open" at their own start (below Kineto's 1 ns)
    e = s + np.maximum(durs, 1e-4)
    order = start_order(s, durs)  # by start, longest first on ties so parents come first
    so, eo = s[order], e[order]
    ends_sorted = np.sort(eo)
    # started before me (index) minus already ended strictly before my start
    depth = np.arange(n) - np.searchsorted(ends_sorted, so, side="right")
    # side="right": a sibling ending exactly where I start (common with integer us) is closed
    depth = np.maximum(depth, 0)
    key = depth.astype(np.int64) * (n + 1) + np.arange(n)
    sorted_keys = np.sort(key)
    want = (depth - 1).astype(np.int64) * (n + 1) + np.arange(n)
    pos = np.searchsorted(sorted_keys, want, side="left") - 1
    cand = np.where(pos >= 0, sorted_keys[np.maximum(pos, 0)], -1)
    cand_depth = np.where(cand >= 0, cand // (n + 1), -2)
    cand_idx = np.where(cand >= 0, cand % (n + 1), -1)
    ok = (depth > 0) & (cand_depth == depth - 1)
    # guard: the candidate must really contain me (bad nesting from clock jitter)
    ok &= np.where(ok, eo[np.maximum(cand_idx, 0)] >= eo - 1e-3, False)
    parent_sorted = np.where(ok, cand_idx, -1)
    out = np.full(n, -1, dtype=np.int64)
    valid = parent_sorted >= 0
    out[order[valid]] = order[parent_sorted[valid]]
    return out


def start_order(s: np.ndarray, durs: np.ndarray) -> np.ndarray:
    """np.lexsort((-durs, s)): by start, the longer first at one start, else in index order. One
    thread's events come mostly in start order: a stable sort by start is then near linear, and
    only the runs of equal starts are sorted by duration (lexsort took 12 ms on 1e5 sorted starts)."""
    order = np.argsort(s, kind="stable")
    so = s[order]
    same = so[1:] == so[:-1]
    if np.isnan(so[-1:]).any():   # (numpy's sorts put NaN last and take them as equal)
        same |= np.isnan(so[1:]) & np.isnan(so[:-1])
    if not same.any():
        return order
    tied = np.zeros(len(s), dtype=bool)   # positions in a run of equal starts
    tied[1:] |= same
    tied[:-1] |= same
    at = np.flatnonzero(tied)
    run = np.cumsum(np.concatenate(([True], ~same)))[at]   # which run each tied position is in
    idx = order[at]
    order[at] = idx[np.lexsort((-durs[idx], run))]
    return order


def innermost_open(group: np.ndarray, starts: np.ndarray, durs: np.ndarray, q_group: np.ndarray,
                   q_t: np.ndarray) -> np.ndarray:
    """For each query (q_group[i], q_t[i]): the index of the interval of that group open at q_t
    (start <= q_t <= start + dur) that comes last in start order (the latest start, then the
    shorter, then the later index), -1 where none is: what a call stack's top is at q_t. Groups
    are dense codes, 0..n (a query's may be one no interval has, e.g. -1: (group, time) becomes one
    int64); times finite."""
    out = np.full(len(q_t), -1, dtype=np.int64)
    if not len(starts) or not len(q_t):
        return out
    with np.errstate(over="ignore"):   # an end past float's range is inf, as Python's sum is
        ends = starts + durs
    # (group, time) as one exact integer key: the times' ranks among all of them (an offset per
    # group in float would round, and could make a start after q_t equal to it)
    times = distinct(np.concatenate((starts, q_t)))
    width = len(times) + 1
    key = group.astype(np.int64) * width + np.searchsorted(times, starts)
    q_key = q_group.astype(np.int64) * width + np.searchsorted(times, q_t)
    order = start_order(key, durs)
    last = np.searchsorted(key[order], q_key, side="right") - 1   # the last started by then
    j = MaxTree(ends[order]).last_at_least(last, q_t)             # ... of those still open
    found = j >= 0
    found[found] = group[order[j[found]]] == q_group[found]
    out[found] = order[j[found]]
    return out


def last_holding(starts: np.ndarray, ends: np.ndarray, x: np.ndarray) -> np.ndarray:
    """For each x: the largest k with starts[k] <= x < ends[k], -1 where there is none (the later
    interval wins where several hold x, as a loop assigning each in turn). That loop, one pass over
    x per interval, for a few intervals or overlapping ones; one binary search for many disjoint
    ones (a capture of hundreds of steps)."""
    out = np.full(len(x), -1, dtype=np.int64)
    live = np.flatnonzero(ends > starts)   # an empty interval holds nothing
    if not len(live) or not len(x):
        return out
    order = live[np.argsort(starts[live], kind="stable")]
    s, e = starts[order], ends[order]
    if len(live) > PASSES_MAX and (e[:-1] <= s[1:]).all():
        k = np.searchsorted(s, x, side="right") - 1
        held = k >= 0
        held[held] = x[held] < e[k[held]]
        out[held] = order[k[held]]
        return out
    for k in live.tolist():
        out[(x >= starts[k]) & (x < ends[k])] = k
    return out


def self_times(group: np.ndarray, starts: np.ndarray, durs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(self time, parent index) of nested intervals: duration minus direct children's durations."""
    par = parents(group, starts, durs)
    child = np.zeros(len(durs))
    has = par >= 0
    np.add.at(child, par[has], durs[has])
    return np.maximum(durs - child, 0.0), par


def covered_in_windows(starts: np.ndarray, ends: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """For each window [lo[k], hi[k]]: time covered by the union of the intervals (one merge, then
    binary searches, so many windows cost O((n + k) log n))."""
    ms, me = merge(starts, ends)
    lo, hi = np.asarray(lo, dtype=np.float64), np.asarray(hi, dtype=np.float64)
    if len(ms) == 0:
        return np.zeros(len(lo))
    cum = np.r_[0.0, np.cumsum(me - ms)]
    i = np.searchsorted(me, lo, side="right")      # first segment that ends after lo
    j = np.searchsorted(ms, hi, side="left")       # segments [i, j) start before hi
    total = cum[j] - cum[i]
    has = j > i
    ii, jj = np.minimum(i, len(ms) - 1), np.maximum(j - 1, 0)
    total -= np.where(has, np.maximum(0.0, lo - ms[ii]), 0.0)
    total -= np.where(has, np.maximum(0.0, me[jj] - hi), 0.0)
    return np.where(has, total, 0.0)
