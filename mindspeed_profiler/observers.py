"""Who follows a process's iterations: observers called at every iteration boundary of every
IntegratedProfiler of the process, also when `integrated.profile` is false, as
`(profiler, event, iteration)` with event "start" (iteration begins), "step" (the previous one
ended, `iteration` begins) or "stop" (`iteration` ends). Process-level capture (system/worker.py)
subscribes here. A boundary costs one falsy check when nobody listens; a failing observer is
reported once and never stops the step. Imports nothing of the package but the warn-once helper."""
from __future__ import annotations

from typing import Any, Callable

from mindspeed_profiler._warn import warn_once

Observer = Callable[[Any, str, "int | None"], None]

ITERATION_LISTENERS: list[Observer] = []


def subscribe(observer: Observer) -> None:
    if observer not in ITERATION_LISTENERS:
        ITERATION_LISTENERS.append(observer)


def unsubscribe(observer: Observer) -> None:
    if observer in ITERATION_LISTENERS:
        ITERATION_LISTENERS.remove(observer)


def notify_iteration(profiler: Any, event: str, iteration: int | None) -> None:
    """Tell every observer; a failing one is reported once and never stops the step."""
    for listener in list(ITERATION_LISTENERS):
        try:
            listener(profiler, event, iteration)
        except Exception as exc:  # profiling never kills training
            warn_once(("iteration-listener", type(exc).__name__), "iteration listener %r failed (training goes on): %s: %s",
                      listener, type(exc).__name__, exc)
