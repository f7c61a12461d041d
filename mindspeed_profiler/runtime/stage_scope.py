"""`with prof.stage(name)`: what entering and leaving one RL stage does in a profiler, in the order
runtime/boundary.py declares (STAGE_ENTRY: the stage name in STATE, the capture of a selected call,
the observers' stage contexts, the tracer's stage span, the stage's range inside a running capture)
and the reverse on the way out. IntegratedProfiler.stage() returns one; it drives the profiler
through its public interface (runtime/protocols.py's StageHost) and its captures
(runtime/captures.py).
"""
from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

from mindspeed_profiler.core import formats
from mindspeed_profiler.capture import observers
from mindspeed_profiler.core.state import STATE
from mindspeed_profiler.backends import Backend
from mindspeed_profiler.runtime.boundary import stage_runners

if TYPE_CHECKING:
    from mindspeed_profiler.runtime.protocols import StageHost


class StageScope:
    """`with prof.stage(name)`: sets STATE.stage, a tracer span, a capture per selected call, and
    the stage contexts of the observers (observers.py)."""

    __slots__ = ("p", "name", "prev", "span", "cap", "rng", "subs")

    def __init__(self, p: StageHost, name: str):
        self.p, self.name = p, name
        self.span = self.cap = self.rng = self.subs = None

    # __enter__ and __exit__: runtime/boundary.py's STAGE_ENTRY row, below the class

    # ------------------------------------------------------------------ the entry, in STAGE_ENTRY's order

    def _stage_name(self) -> None:
        self.prev = STATE.stage
        STATE.stage = self.name
        self.p.iteration_busy = True

    # (each called only when runtime/boundary.py's GUARDS say it has something to do)

    def _stage_capture(self) -> None:
        p = self.p
        self.cap = p.capturing.stage_call(self.name, p.iteration)

    def _stage_observers(self) -> None:
        p = self.p
        if observers.ITERATION_LISTENERS:
            self.subs = observers.enter_stage(observers.ITERATION_LISTENERS, p, self.name)
        if p.observers:
            self.subs = observers.enter_stage(p.observers, p, self.name, self.subs)

    def _stage_span(self) -> None:
        p = self.p
        self.span = p.spans.enter(self.name, formats.CAT_STAGE, {"stage": self.name, "iteration": p.iteration})

    def _stage_range(self) -> None:
        self.rng = _stage_range(self.p.backend, self.name)

    # ------------------------------------------------------------------ the exit: each undoes its entry
    # (runtime/boundary.py's GUARDS call each only when its entry left something to undo)

    def _undo_stage_range(self, exc: Any) -> None:
        impl, token = self.rng
        with contextlib.suppress(Exception):
            impl.end(token, "default")

    def _undo_stage_span(self, exc: Any) -> None:
        self.p.spans.exit(self.span)

    def _undo_stage_observers(self, exc: Any) -> None:
        observers.exit_stage(self.subs, exc)

    def _undo_stage_capture(self, exc: Any) -> None:
        self.p.capturing.close(self.cap)

    def _undo_stage_name(self, exc: Any) -> None:
        STATE.stage = self.prev


StageScope.__enter__, StageScope.__exit__ = stage_runners(StageScope)


def _stage_range(backend: Backend | None, name: str):
    """(marker implementation, token) of a range drawing the stage inside the running capture
    (record_function for torch and torch_npu, the lightweight recorder's own buffer), or None."""
    from mindspeed_profiler.runtime.mstx import load_marker

    impl = load_marker(backend.stage_marker if backend is not None else "record_function")
    if impl is None:
        return None
    try:
        token = impl.start(name, "default", None)
    except Exception:
        return None
    return (impl, token) if token is not None else None
