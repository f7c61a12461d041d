"""msprof-analyze 26.2.0's slow-rank vote (`msprof-analyze cluster -m slow_rank`,
cluster_analyse/recipes/slow_rank/slow_rank.py), re-implemented: per (communication group, op
name), the rank whose elapse time is a short outlier (Dixon's one-sided test up to 100 ranks, three
sigma beyond) arrived last, and gets a vote. Pure; docs/diagnosis.md ("On Ascend: wait times, and
msprof-analyze's slow-rank vote"); tests/test_ascend_stragglers.py runs the recipe itself."""
from __future__ import annotations

import numpy as np

# msprof-analyze 26.2.0's slow_rank constants (prof_common/constant.py MAX_DIXON_NUM, DIXON_THRESHOLD_*;
# recipes/slow_rank/dixon_table.py DIXON_TABLE_995, one-sided Dixon test at 99.5%, n = 3..100)
MAX_DIXON_NUM = 100
DIXON_THRESHOLDS = (7, 10, 13)
NORM_SIGMAS = 3
DIXON_TABLE_995 = dict(zip(range(3, 101), (
    0.994, 0.92, 0.823, 0.744, 0.68, 0.723, 0.676, 0.638, 0.707, 0.675, 0.649, 0.672, 0.649, 0.629, 0.611, 0.595,
    0.58, 0.568, 0.556, 0.545, 0.536, 0.526, 0.519, 0.51, 0.503, 0.496, 0.489, 0.484, 0.478, 0.473, 0.468, 0.463,
    0.458, 0.454, 0.45, 0.446, 0.442, 0.439, 0.435, 0.432, 0.429, 0.425, 0.423, 0.42, 0.417, 0.414, 0.412, 0.409,
    0.407, 0.405, 0.402, 0.4, 0.398, 0.396, 0.394, 0.392, 0.391, 0.388, 0.387, 0.385, 0.383, 0.382, 0.38, 0.379,
    0.377, 0.376, 0.374, 0.372, 0.371, 0.37, 0.368, 0.368, 0.366, 0.365, 0.364, 0.363, 0.361, 0.36, 0.359, 0.358,
    0.356, 0.356, 0.355, 0.353, 0.352, 0.352, 0.351, 0.35, 0.349, 0.348, 0.347, 0.346, 0.345, 0.344, 0.344, 0.343,
    0.341, 0.341)))


def judge_norm(times: list[float], threshold: float = NORM_SIGMAS) -> list[int]:
    """msprof-analyze's three-sigma rule (slow_rank.py:32-47, over 100 ranks): the indexes below mean
    - 3 std (population std), and the shortest one too when one is above mean + 3 std."""
    mean, std = np.mean(times), np.std(times)
    out = [i for i, t in enumerate(times) if t < mean - threshold * std]
    if max(times) > mean + threshold * std and times.index(min(times)) not in out:
        out.append(times.index(min(times)))
    return out


def judge_dixon(times: list[float]) -> list[int]:
    """msprof-analyze's one-sided Dixon test (slow_rank.py:50-78): the shortest time is an outlier
    when its gap to the next (or next but one) over the range (less the largest one or two, by n)
    exceeds the 99.5% table; nothing with 3 distinct values or fewer (its guard against a zero range)."""
    n = len(times)
    s = sorted(times)
    if n <= 2 or len(set(s)) <= 3 or n > MAX_DIXON_NUM:
        return []
    lo, hi = (1, -1) if n <= DIXON_THRESHOLDS[0] else (1, -2) if n <= DIXON_THRESHOLDS[1] \
        else (2, -2) if n <= DIXON_THRESHOLDS[2] else (2, -3)
    flag = (s[lo] - s[0]) / (s[hi] - s[0]) if (s[hi] - s[0]) else 0
    return [times.index(s[0])] if flag > DIXON_TABLE_995[n] else []


def judge_slow_rank(times: list[float]) -> list[int]:
    """slow_rank.py:81-86: Dixon up to MAX_DIXON_NUM ranks, three sigma beyond."""
    return judge_dixon(times) if len(times) <= MAX_DIXON_NUM else judge_norm(times)


def slow_rank_vote(per_rank: dict[int, list[tuple]]) -> tuple[dict[int, int], list[dict]]:
    """msprof-analyze 26.2.0's slow_rank recipe (SlowRankVoteAnalysis, slow_rank.py:172-261) on
    `per_rank` {rank: [(group, op, start, elapse_us), ...]}: ops named *send* / *receive* left out, a
    group left out where its op names do not all occur equally often, then per (group, op) the
    outliers of its elapse times over the rows (the shortest: the rank that arrived last) get a vote.
    Returns ({rank: slowAffectCount}, only ranks with a vote, as rank_stats.csv) and the voted ops
    [{group, op, slow_ranks, timestamp, count}] (slow_op_stats.csv's SlowRank, GroupName, OpName,
    Timestamp, Count), ordered by timestamp."""
    flat = [(r, str(g), str(o), s, float(t)) for r in sorted(per_rank) for g, o, s, t in per_rank[r]
            if "send" not in str(o) and "receive" not in str(o)]
    sizes: dict[str, dict[str, int]] = {}
    for _r, g, o, _s, _t in flat:
        sizes.setdefault(g, {})[o] = sizes.setdefault(g, {}).get(o, 0) + 1
    uneven = {g for g, c in sizes.items() if len(set(c.values())) > 1}   # ranks missing ops: no fair vote
    grouped: dict[str, dict[str, list[int]]] = {}
    for i, (_r, g, o, _s, _t) in enumerate(flat):
        if g not in uneven:
            grouped.setdefault(g, {}).setdefault(o, []).append(i)
    votes: dict[int, int] = {}
    slow_ops = []
    for g, ops in grouped.items():
        for o, idx in ops.items():
            hit = judge_slow_rank([flat[i][4] for i in idx])
            if not hit:
                continue
            ranks = [flat[idx[j]][0] for j in hit]
            for r in ranks:
                votes[r] = votes.get(r, 0) + 1
            slow_ops.append({"group": g, "op": o, "slow_ranks": ranks, "count": len(idx),
                             "timestamp": min(flat[idx[j]][3] for j in hit)})
    return votes, sorted(slow_ops, key=lambda x: x["timestamp"])
