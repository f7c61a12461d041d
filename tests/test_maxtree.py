"""analyzers/maxtree.py and intervals.innermost_open, against brute force on random arrays (ties,
empty ranges, one value, none), and innermost_open against a call stack replayed event by event
(what memory_peaks did before: push the ops started by then, pop those ended)."""
from __future__ import annotations

import numpy as np
import pytest

from mindspeed_profiler.analysis.analyzers.intervals import innermost_open
from mindspeed_profiler.analysis.analyzers.maxtree import MaxTree


@pytest.mark.parametrize("seed", range(4))
def test_range_max_and_last_at_least_equal_brute_force(seed):
    rng = np.random.default_rng(seed)
    for _ in range(300):
        n = int(rng.integers(0, 70))
        v = rng.integers(0, 12, n)
        tree = MaxTree(v)
        lo, hi = rng.integers(0, n + 1, 40), rng.integers(0, n + 1, 40)
        assert tree.range_max(lo, hi, -1).tolist() == [int(v[a:b].max()) if b > a else -1 for a, b in zip(lo, hi)]
        last = rng.integers(-1, n, 40) if n else np.full(40, -1)
        bound = rng.integers(0, 13, 40)
        want = [max((j for j in range(L + 1) if v[j] >= b), default=-1) for L, b in zip(last, bound)]
        assert tree.last_at_least(last, bound).tolist() == want


def test_floats_and_a_large_array():
    v = np.random.default_rng(9).random(5000)
    tree = MaxTree(v)
    lo = np.arange(0, 5000, 7)
    hi = np.minimum(lo + 1000, 5000)
    assert np.array_equal(tree.range_max(lo, hi, -np.inf), [v[a:b].max() for a, b in zip(lo, hi)])
    assert tree.last_at_least(np.array([4999]), np.array([2.0])).tolist() == [-1]
    assert tree.last_at_least(np.array([4999]), np.array([v.max()])).tolist() == [int(np.argmax(v))]


def _stack_innermost(group, starts, durs, q_group, q_t) -> list[int]:
    """The call stack replayed: per group, ops by (start, longer first, index) pushed when started
    (the ended ones popped first), each query answered by the top once the ended ones are popped."""
    out = [-1] * len(q_t)
    for g in set(q_group.tolist()):
        ops = sorted((starts[k], -durs[k], k) for k in range(len(starts)) if group[k] == g)
        qs = sorted((q_t[i], i) for i in range(len(q_t)) if q_group[i] == g)
        stack, j = [], 0
        for t, i in qs:
            while j < len(ops) and ops[j][0] <= t:
                while stack and stack[-1][1] < ops[j][0]:
                    stack.pop()
                stack.append((ops[j][2], ops[j][0] - ops[j][1]))
                j += 1
            while stack and stack[-1][1] < t:
                stack.pop()
            out[i] = stack[-1][0] if stack else -1
    return out


@pytest.mark.parametrize("seed", range(4))
def test_innermost_open_is_the_call_stacks_top(seed):
    rng = np.random.default_rng(seed)
    for _ in range(150):
        n, q = int(rng.integers(0, 60)), int(rng.integers(0, 40))
        group = rng.integers(0, 3, n)
        starts = rng.integers(0, 30, n).astype(np.float64) + rng.choice([0.0, 0.5], n)
        durs = rng.integers(0, 15, n).astype(np.float64)     # zero-length, nested and overlapping ops
        q_group = rng.integers(-1, 4, q)                      # -1 and 3: groups no op has
        q_t = rng.integers(0, 45, q).astype(np.float64) + rng.choice([0.0, 0.5], q)
        got = innermost_open(group, starts, durs, q_group, q_t)
        assert got.tolist() == _stack_innermost(group, starts, durs, q_group, q_t)


def test_innermost_open_compares_large_times_exactly():
    # at 2**52 floats are 1 apart: an op starting 1 after the query does not enclose it, one ending
    # exactly at it does
    t = float(2**52)
    got = innermost_open(np.array([0, 0]), np.array([t + 1, t - 5]), np.array([0.0, 5.0]), np.array([0, 0]),
                         np.array([t, t + 1]))
    assert got.tolist() == [1, 0]
