"""Small helpers shared by the analyzers."""
from __future__ import annotations

import numpy as np


def top(rows: list[dict], key: str, top_n: int) -> list[dict]:
    """The top_n rows by `key`, largest first (stable for ties)."""
    return sorted(rows, key=lambda r: -r[key])[:top_n]


def group_sum(keys: np.ndarray, weights: np.ndarray, n: int) -> np.ndarray:
    return np.bincount(keys, weights=weights, minlength=n) if len(keys) else np.zeros(n)
