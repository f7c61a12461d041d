"""Interval arithmetic and call-stack nesting against brute force on random cases."""
from __future__ import annotations

import random

import numpy as np
import pytest

from mindspeed_profiler.analysis.analyzers.intervals import clip, covered_in_windows, parents, union_length


def brute_union(s, e):
    pts = sorted(set(np.r_[s, e].tolist()))
    return sum(b - a for a, b in zip(pts, pts[1:]) if any(x <= a and b <= y for x, y in zip(s, e)))


def test_union_and_windows_match_brute_force():
    rng = np.random.default_rng(0)
    for _ in range(200):
        s = rng.uniform(0, 100, 25)
        e = s + rng.uniform(0, 10, 25)
        assert union_length(s, e) == pytest_approx(brute_union(s, e))
        lo = rng.uniform(-10, 110, 6)
        hi = lo + rng.uniform(0, 50, 6)
        got = covered_in_windows(s, e, lo, hi)
        exp = [brute_union(*clip(s, e, a, b)) for a, b in zip(lo, hi)]
        assert np.allclose(got, exp)
    assert union_length(np.empty(0), np.empty(0)) == 0.0
    assert list(covered_in_windows(np.empty(0), np.empty(0), [0.0], [1.0])) == [0.0]


def pytest_approx(x):
    import pytest
    return pytest.approx(x, abs=1e-6)


def random_forest(rng: random.Random):
    """Properly nested intervals on 3 threads with known parents (integer times, adjacent siblings)."""
    ev = []

    def rec(s, e, depth, g, par):
        t = s
        while t < e and rng.random() < 0.8:
            a = t + rng.choice([0, 0, 1, 2])
            b = min(e, a + rng.randint(1, 10))
            if b <= a:
                break
            ev.append((g, a, b - a, par))
            if depth < 4:
                rec(a, b, depth + 1, g, len(ev) - 1)
            t = b + rng.choice([0, 1])
    for g in range(3):
        rec(0, 100, 0, g, -1)
    return ev


def test_parents_match_generation():
    rng = random.Random(1)
    checked = 0
    for _ in range(300):
        ev = random_forest(rng)
        if not ev:
            continue
        g = np.array([x[0] for x in ev])
        s = np.array([x[1] for x in ev], dtype=float) + 1.7e9   # large absolute times like real traces
        d = np.array([x[2] for x in ev], dtype=float)
        got = parents(g, s, d)
        for i, (_, a, du, par) in enumerate(ev):
            same = lambda j: j >= 0 and ev[j][1:3] == (a, du)   # identical intervals: either can be the parent
            if not (same(par) or same(got[i])):
                assert got[i] == par, (i, ev[i], got[i])
                checked += 1
    assert checked > 5000


def test_start_order_is_lexsort_by_start_then_longest():
    """start_order (a stable sort by start, the runs of equal starts sorted by duration) gives
    np.lexsort((-durs, s)) exactly: random starts with many ties, sorted and unsorted, NaN and
    infinite starts, NaN and -0.0 durations, empty and one-element inputs."""
    from mindspeed_profiler.analysis.analyzers.intervals import start_order

    rng = np.random.default_rng(11)
    for trial in range(2000):
        n = int(rng.integers(0, 50))
        s = rng.integers(0, 8, n).astype(float)
        if trial % 3 == 0:
            s = np.sort(rng.integers(0, 30, n)).astype(float)
        d = rng.integers(0, 4, n).astype(float)
        if trial % 4 == 0 and n:
            s[rng.integers(0, n, 3)] = np.nan
            d[rng.integers(0, n, 2)] = np.nan
            d[rng.integers(0, n)] = -0.0
        if trial % 7 == 0 and n > 3:
            s[rng.integers(0, n)] = np.inf
            s[rng.integers(0, n)] = -np.inf
        assert np.array_equal(start_order(s, d), np.lexsort((-d, s))), (s, d)


@pytest.mark.parametrize("passes_max", [16, 0])   # as shipped (these few: the loop) and the binary search
@pytest.mark.parametrize("seed", range(3))
def test_last_holding_is_the_loop_of_each_interval_in_turn(seed, passes_max, monkeypatch):
    """intervals.last_holding against assigning each interval's holders in index order (what
    stragglers does per ProfilerStep for a few steps): disjoint intervals (the binary search), in any
    order, empty and touching ones, and overlapping ones (the loop)."""
    from mindspeed_profiler.analysis.analyzers import intervals
    from mindspeed_profiler.analysis.analyzers.intervals import last_holding
    monkeypatch.setattr(intervals, "PASSES_MAX", passes_max)
    rng = np.random.default_rng(seed)
    for trial in range(200):
        n = int(rng.integers(0, 8))
        if trial % 2:
            cuts = np.sort(rng.integers(0, 40, 2 * n)).astype(np.float64)
            p = rng.permutation(n)
            starts, ends = cuts[0::2][p], cuts[1::2][p]
        else:
            starts = rng.integers(0, 30, n).astype(np.float64)
            ends = starts + rng.integers(-2, 15, n)
        x = rng.integers(-2, 45, 60).astype(np.float64)
        want = np.full(len(x), -1)
        for k in range(n):
            want[(x >= starts[k]) & (x < ends[k])] = k
        assert last_holding(starts, ends, x).tolist() == want.tolist()
