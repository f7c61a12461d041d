"""Small helpers shared by the analyzers."""
from __future__ import annotations

import numpy as np


def top(rows: list[dict], key: str, top_n: int) -> list[dict]:
    """The top_n rows by `key`, largest first (stable for ties)."""
    return sorted(rows, key=lambda r: -r[key])[:top_n]


def group_sum(keys: np.ndarray, weights: np.ndarray, n: int) -> np.ndarray:
    return np.bincount(keys, weights=weights, minlength=n) if len(keys) else np.zeros(n)


# np.unique and np.median are not used on the analysis's paths: numpy >= 2.3's np.unique hashes (on the
# correlation ids of a long trace, 1.5e6 over many ranges, 0.4-4 s where a sort takes 0.05 s), and
# both (plain np.unique, np.median's NaN check) import numpy.ma, 10 ms of a cold `analyse` (issue 34)

def run_starts(s: np.ndarray) -> np.ndarray:
    """Where each run of equal values begins in a sorted array (its first index, 0 included)."""
    return np.flatnonzero(np.concatenate(([True], s[1:] != s[:-1]))) if len(s) else np.zeros(0, dtype=np.int64)


def distinct(a: np.ndarray) -> np.ndarray:
    """np.unique(a) of an integer (or NaN-free) array, by sorting."""
    s = np.sort(a)
    return s[run_starts(s)]


def member(x: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """np.isin(x, ids) of integers, for ids sorted and unique (`distinct`), by binary search."""
    if not len(ids):
        return np.zeros(len(x), dtype=bool)
    return ids[np.minimum(np.searchsorted(ids, x), len(ids) - 1)] == x


def median(values) -> float:
    """np.median of a 1-D sequence of numbers (NaN when it is empty or holds a NaN; without
    np.median's empty-slice warning)."""
    a = np.asarray(values, dtype=np.float64).ravel()
    n = len(a)
    if n == 0 or np.isnan(a).any():
        return float("nan")
    k = n // 2
    if n % 2:
        return float(np.partition(a, k)[k])
    part = np.partition(a, [k - 1, k])
    return float((part[k - 1] + part[k]) / 2)
