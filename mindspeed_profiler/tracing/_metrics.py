"""Per-name timing of marked ranges (count / total / max seconds), for trainers to log per iteration,
and SWITCH, the flag the marked-call wrappers read first.

Lives apart from mstx.py because the shared call wrapper (_wrap.py) reads SWITCH inline.
"""
from __future__ import annotations

import threading

from mindspeed_profiler._state import STATE


class _Switch:
    """`on` is True while the tracer or marker metrics are on. A marked call reads it and
    `STATE.mstx_enabled` (the device markers, which the profiler session writes) and nothing else
    when both are False: two slot reads, the off path's whole cost (docs/perf_tracing.md)."""

    __slots__ = ("on",)

    def __init__(self) -> None:
        self.on = False


SWITCH = _Switch()


def refresh_switch() -> None:
    """Recompute SWITCH.on; called by whoever changes `STATE.tracer` (tracing/api.py) or METRICS.on."""
    SWITCH.on = METRICS._on or STATE.tracer is not None


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
