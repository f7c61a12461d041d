"""Per-name timing of marked ranges (count / total / max seconds), for trainers to log per iteration.

Lives apart from mstx.py because the shared call wrapper checks `METRICS.on` inline.
"""
from __future__ import annotations

import threading


class Metrics:
    __slots__ = ("on", "data", "lock")

    def __init__(self) -> None:
        self.on = False
        self.data: dict[str, list] = {}
        self.lock = threading.Lock()

    def add(self, name: str, seconds: float) -> None:
        with self.lock:
            entry = self.data.get(name)
            if entry is None:
                self.data[name] = [1, seconds, seconds]
            else:
                entry[0] += 1
                entry[1] += seconds
                if seconds > entry[2]:
                    entry[2] = seconds

    def snapshot(self, reset: bool = False) -> dict[str, dict[str, float]]:
        with self.lock:
            out = {k: {"count": v[0], "total_s": v[1], "max_s": v[2]} for k, v in self.data.items()}
            if reset:
                self.data.clear()
        return out


METRICS = Metrics()
