"""Per-name timing of marked ranges (count / total / max seconds), for trainers to log per iteration,
and refresh_switch, which keeps _state.SWITCH (the flag the marked-call wrappers read first) up to
date for the tracer and the metrics.

Lives apart from mstx.py because the shared call wrapper (tracing/wrap.py) reads SWITCH inline.
"""
from __future__ import annotations

import threading

from mindspeed_profiler.core.state import STATE, update_switch


def refresh_switch() -> None:
    """Recompute SWITCH; called by whoever changes `STATE.tracer` (tracing/api.py) or METRICS.on."""
    update_switch(recording=METRICS._on or STATE.tracer is not None)


class Metrics:
    __slots__ = ("_on", "data", "lock")

    def __init__(self) -> None:
        self._on = False
        self.data: dict[str, list] = {}
        self.lock = threading.Lock()

    @property
    def on(self) -> bool:
        return self._on

    @on.setter
    def on(self, value: bool) -> None:  # a property so that no writer can leave SWITCH stale
        self._on = bool(value)
        refresh_switch()

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
