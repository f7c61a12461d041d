"""Who follows a profiler's iterations: one observer protocol for the on-demand listener
(ondemand/listener.py), process-level capture (system/worker.py), the metrics tracker
(metrics/tracker.py) and a user's own hooks.

An observer has four methods (`Observer` has them as no-ops; any object with them will do):

    started(profiler, iteration)   start(): iteration `iteration` begins
    stage(profiler, name)          a stage call begins: a context manager held around it, or None
    step(profiler, iteration)      step(): the previous iteration ended, `iteration` begins
    stopped(profiler, iteration)   stop(): `iteration` ends, the profiler stops

Two lists, told at different moments of a boundary:
- process-wide (ITERATION_LISTENERS, subscribe / unsubscribe): every IntegratedProfiler of the
  process tells them, also when `integrated.profile` is false, before it acts on the boundary (an
  iteration's time is the training's, not the profiler's start or export);
- per profiler (`profiler.observers`, add_observer): told after the profiler opened its captures at
  start / step and before it closes them at stop; their stage contexts are entered after the stage's
  capture started and left, in reverse order, before it is exported.
Stage calls reach observers only while the profiler runs. A plain callable in either list is the
older hook, called as `(profiler, event, iteration)`, event "start", "step" or "stop".

A boundary costs one falsy check when nobody listens; a failing observer is reported once and never
stops the step. Imports nothing of the package but the warn-once helper.
"""
from __future__ import annotations

from typing import Any, ContextManager, Protocol

from mindspeed_profiler.core.warn import warn_once

class ObservedProfiler(Protocol):
    """What an observer may read of the profiler it is told about (IntegratedProfiler has all of
    it): the types of the `profiler` parameters below."""

    role: str
    model_size: Any   # metrics.ModelSize or None, from set_model()

    @property
    def iteration(self) -> int | None: ...

    @property
    def step_counts(self) -> dict[str, int]: ...

    @property
    def iteration_window(self) -> tuple[float | None, float | None]: ...


class Observer:
    """The observer protocol, each method a no-op: subclass and override what you need."""

    def started(self, profiler: ObservedProfiler, iteration: int) -> None:
        """`profiler` started: iteration `iteration` begins."""

    def stage(self, profiler: ObservedProfiler, name: str) -> ContextManager[Any] | None:
        """A call of stage `name` begins: a context manager to hold around it, or None."""
        return None

    def step(self, profiler: ObservedProfiler, iteration: int) -> None:
        """The previous iteration ended, `iteration` begins."""

    def stopped(self, profiler: ObservedProfiler, iteration: int | None) -> None:
        """Iteration `iteration` ends and `profiler` stops."""


ITERATION_LISTENERS: list[Any] = []   # process-wide: Observer-like objects or plain callables

_EVENTS = {"started": "start", "step": "step", "stopped": "stop"}


def subscribe(observer: Any) -> None:
    """Follow every profiler of this process (an Observer-like object or a plain callable)."""
    if observer not in ITERATION_LISTENERS:
        ITERATION_LISTENERS.append(observer)


def unsubscribe(observer: Any) -> None:
    if observer in ITERATION_LISTENERS:
        ITERATION_LISTENERS.remove(observer)


def _failed(observer: Any, method: str, exc: Exception) -> None:
    # once per observer (by name) and kind of failure, whichever boundary it failed at
    name = getattr(observer, "__qualname__", None) or type(observer).__qualname__
    warn_once(("iteration-listener", name, type(exc).__name__), "iteration listener %r failed in %s (training goes on): %s: %s",
              observer, method, type(exc).__name__, exc)


def notify(listeners: list[Any], method: str, profiler: ObservedProfiler, iteration: int | None) -> None:
    """Call `method` ("started", "step" or "stopped") of every observer in `listeners`."""
    for obs in list(listeners):
        try:
            fn = getattr(obs, method, None)
            if fn is not None:
                fn(profiler, iteration)
            else:
                obs(profiler, _EVENTS[method], iteration)
        except Exception as exc:  # profiling never kills training
            _failed(obs, method, exc)


def enter_stage(listeners: list[Any], profiler: ObservedProfiler, name: str, entered: list[Any] | None = None) -> list[Any] | None:
    """Enter the stage context of every observer in `listeners` that gives one; returns `entered`
    with them appended (a new list only when one is entered: a stage call with idle observers
    allocates nothing), for exit_stage to leave in reverse order."""
    for obs in list(listeners):
        fn = getattr(obs, "stage", None)
        if fn is None:
            continue   # a plain callable hears no stages
        try:
            ctx = fn(profiler, name)
            if ctx is not None:
                ctx.__enter__()
                if entered is None:
                    entered = []
                entered.append((obs, ctx))
        except Exception as exc:
            _failed(obs, "stage", exc)
    return entered


def exit_stage(entered: list[Any], exc_info: tuple[Any, ...]) -> None:
    for obs, ctx in reversed(entered):
        try:
            ctx.__exit__(*exc_info)
        except Exception as exc:
            _failed(obs, "stage", exc)
