"""Maxima of a fixed array over many index ranges at once: a tree of the maxima of its aligned
blocks of 1, 2, 4, ... values (2n values in all, against a sparse table's n log n), queried for
a whole array of ranges in O(log n) vectorised steps. Pure numpy.

What the memory block asks of it (analyzers/memory_peaks.py): the largest Total Allocated inside
each of thousands of annotated ranges, and, for each [memory] event, the last host op in start
order still open at its time (the innermost op enclosing it), without a loop per event.
"""
from __future__ import annotations

import numpy as np


class MaxTree:
    """levels[k][b] = max(values[b * 2**k : (b + 1) * 2**k]) (the last block of a level may be short)."""

    def __init__(self, values: np.ndarray) -> None:
        level = np.asarray(values)
        self.n = len(level)
        self.levels = [level]
        while len(level) > 1:
            pairs = len(level) // 2
            up = np.maximum(level[0:2 * pairs:2], level[1:2 * pairs:2])
            level = np.concatenate((up, level[-1:])) if len(level) % 2 else up
            self.levels.append(level)

    def range_max(self, lo: np.ndarray, hi: np.ndarray, empty: float) -> np.ndarray:
        """max(values[lo[i]:hi[i]]) for each i (0 <= lo, hi <= n), `empty` where the range is empty;
        `empty` must not exceed any value (it starts every maximum) and must fit the values' dtype."""
        lo, hi = np.array(lo, dtype=np.int64), np.array(hi, dtype=np.int64)
        out = np.full(len(lo), empty, dtype=self.levels[0].dtype)
        for level in self.levels:   # bottom-up: the blocks wholly inside [lo, hi) at each level
            live = lo < hi
            if not live.any():
                break
            left = live & (lo % 2 == 1)
            out[left] = np.maximum(out[left], level[lo[left]])
            lo[left] += 1
            right = live & (hi % 2 == 1)
            hi[right] -= 1
            out[right] = np.maximum(out[right], level[hi[right]])
            lo //= 2
            hi //= 2
        return out

    def last_at_least(self, last: np.ndarray, bound: np.ndarray) -> np.ndarray:
        """For each i: the largest j <= last[i] with values[j] >= bound[i], -1 where there is none
        (last[i] < n; -1 or less: none; bound an array as long as last)."""
        end = np.asarray(last, dtype=np.int64) + 1   # the prefix [0, end) still to look at
        bound = np.asarray(bound)
        level_of = np.full(len(end), -1, dtype=np.int64)
        block = np.zeros(len(end), dtype=np.int64)
        # up: the aligned blocks that end the prefix, right to left (the set bits of `end`), until
        # one holds a value >= bound
        todo = end > 0
        for k, level in enumerate(self.levels):
            if not todo.any():
                break
            at = todo & ((end >> k) & 1 == 1)
            b = (end[at] >> k) - 1
            hit = level[b] >= bound[at]
            idx = np.flatnonzero(at)
            level_of[idx[hit]], block[idx[hit]] = k, b[hit]
            todo[idx[hit]] = False
            end[idx[~hit]] -= 1 << k
            todo &= end > 0
        # down: inside the block found, the right half wherever it holds one
        for k in range(len(self.levels) - 1, 0, -1):
            at = np.flatnonzero(level_of == k)
            if not len(at):
                continue
            right = 2 * block[at] + 1
            go_right = self.levels[k - 1][right] >= bound[at]
            block[at] = np.where(go_right, right, right - 1)
            level_of[at] = k - 1
        return np.where(level_of == 0, block, -1)
