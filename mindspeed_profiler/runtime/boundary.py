"""What happens at each iteration boundary and stage call of a profiler, in which order: one
table, as torch.profiler's action map, run by profiler.py (start / step / stop) and
stage_scope.py (a stage call's entry; its exit undoes the entry in reverse order).

Each name is a method `_<name>(boundary)` of the object that runs the table. `runner` turns a
boundary's row into one function calling them in order, each behind its cheap guard (GUARDS: the
check the action would begin with, so an idle boundary makes no call for it), and without the
capture actions for a disabled profiler: a boundary costs what the same code written by hand
would (docs/perf_profiler.md), and the order is written only here.

Why this order:
- the process-wide listeners hear a boundary first: an iteration's time is the training's, not
  the profiler's start or export;
- the profiler's own observers are told after its captures opened at start / step, and before
  they close at stop (a running on-demand capture exports what it recorded);
- the iteration's timeline span closes before the captures export and opens after the next
  window opened, so the timeline shows the iteration's own time and the profiler's cost beside it.
"""
from __future__ import annotations

from time import perf_counter
from typing import Any, Callable

from mindspeed_profiler.core.state import STATE
from mindspeed_profiler.capture.observers import ITERATION_LISTENERS

START = "started"   # the observers' method names
STEP = "step"
STOP = "stopped"

ORDER: dict[str, tuple[str, ...]] = {
    START: ("tell_listeners", "begin_captures", "tell_observers", "begin_iteration", "open_iteration_span"),
    STEP: ("tell_listeners", "end_iteration", "close_iteration_span", "step_captures", "advance", "next_window",
           "tell_observers", "begin_iteration", "open_iteration_span"),
    STOP: ("tell_listeners", "end_iteration", "tell_observers", "close_iteration_span", "stop_captures"),
}
# the actions an enabled profiler only has
CAPTURE_ACTIONS = frozenset({"begin_captures", "step_captures", "next_window", "stop_captures"})

# a stage call's entry, in order (its exit: the reverse). The capture starts before the observers'
# stage contexts (a running on-demand capture sees the stage too); the stage's span opens after it
# started and closes before it is exported; the stage's range is drawn inside the running capture.
STAGE_ENTRY = ("stage_name", "stage_capture", "stage_observers", "stage_span", "stage_range")


# the check each action would begin with (a Python expression over `self`, `listeners` and
# `STATE`): when false, the action has nothing to do and is not called
GUARDS = {
    "tell_listeners": "listeners",
    "tell_observers": "self.observers",
    "close_iteration_span": "self._iter_span is not None",
    "open_iteration_span": "STATE.tracer is not None and self._iteration_spans",
    "step_captures": "self.capturing.continuous is not None or self.capturing.stage_calls",
    "next_window": "self.capturing.continuous is None and self.plan.continuous",
    # a stage scope's entry (`self.p`: its profiler)
    "stage_capture": "self.p.enabled and self.p.running",
    "stage_observers": "self.p.running and (listeners or self.p.observers)",
    "stage_span": "STATE.tracer is not None and self.p.request_id is None",
    "stage_range": "STATE.capture_active and self.p.enabled and self.p.running",
    # a stage scope's exit: what its entry left to undo
    "undo_stage_range": "self.rng is not None",
    "undo_stage_span": "self.span is not None",
    "undo_stage_observers": "self.subs",
    "undo_stage_capture": "self.cap is not None",
}


# the actions that are one assignment or two: written here as the statement itself, not as a
# method, since a Python call costs more than the work (an idle step() is these three and the
# guards: docs/perf_profiler.md)
INLINE = {
    "end_iteration": "self._iter_ended = perf_counter(); self._step_counts = self._given_counts",
    "advance": "self._iteration += 1; STATE.iteration = self._iteration",
    "begin_iteration": "self.iteration_busy = False; self._step_counts = {}; self._iter_began = perf_counter()",
}


def sequence(cls: type, names: tuple[str, ...], arg: str | None = None, param: str | None = None,
             result: str = "None") -> Callable[..., Any]:
    """One function `run(self[, param])` calling `self._<name>(arg)` for each name in order (`arg`: a
    Python expression, the constant boundary or the parameter), each behind its GUARDS check, and
    returning `result`. Generated once per class and row: the same code as written by hand,
    without a loop or a call per idle action on the hot path."""
    for name in names:
        if name not in INLINE and not callable(getattr(cls, "_" + name, None)):
            raise TypeError(f"{cls.__name__} has no action _{name} (runtime/boundary.py)")
    lines = [f"def run(self{', ' + param if param else ''}):"]
    for name in names:
        call = INLINE.get(name) or f"self._{name}({arg or ''})"
        guard = GUARDS.get(name)
        lines.append(f"    if {guard}: {call}" if guard else f"    {call}")
    lines.append(f"    return {result}")
    namespace: dict[str, Any] = {}
    exec(compile("\n".join(lines), f"<runtime.boundary {cls.__name__}>", "exec"),  # noqa: S102
         {"listeners": ITERATION_LISTENERS, "STATE": STATE, "perf_counter": perf_counter}, namespace)
    return namespace["run"]


def runners(cls: type, captures: bool) -> dict[str, Callable[[Any, str], None]]:
    """boundary -> the function running its row of ORDER on an instance of `cls` (each action is
    given the boundary); without the capture actions unless `captures`."""
    return {b: sequence(cls, tuple(n for n in names if captures or n not in CAPTURE_ACTIONS), repr(b))
            for b, names in ORDER.items()}


def stage_runners(cls: type) -> tuple[Callable[[Any], Any], Callable[..., bool]]:
    """(`__enter__`, `__exit__`) of a stage scope class: STAGE_ENTRY's actions in order, returning
    the scope; then their `_undo_` actions in reverse order, given the exception info, returning
    False (an exception goes on)."""
    return (sequence(cls, STAGE_ENTRY, result="self"),
            sequence(cls, tuple("undo_" + n for n in reversed(STAGE_ENTRY)), "exc", "*exc", "False"))
