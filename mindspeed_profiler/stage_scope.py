"""`with prof.stage(name)`: what entering and leaving one RL stage does in a profiler, in order (the
stage name in STATE, the capture of a selected call, the observers' stage contexts, the tracer's
stage span, the stage's range inside a running capture) and the reverse on the way out.
IntegratedProfiler.stage() returns one; it reads and drives the profiler it is given (profiler.py).
"""
from __future__ import annotations

import contextlib
from typing import Any

from mindspeed_profiler import formats, observers
from mindspeed_profiler import stages as _stages
from mindspeed_profiler._state import STATE
from mindspeed_profiler.backends import Backend


class StageScope:
    """`with prof.stage(name)`: sets STATE.stage, a tracer span, a capture per selected call, and
    the stage contexts of the observers (observers.py)."""

    __slots__ = ("p", "name", "prev", "span", "cap", "rng", "subs")

    def __init__(self, p: Any, name: str):   # p: the IntegratedProfiler (not imported: it imports this module)
        self.p, self.name = p, name
        self.span = self.cap = self.rng = self.subs = None

    def __enter__(self) -> "StageScope":
        p, name = self.p, self.name
        self.prev = STATE.stage
        STATE.stage = name
        p._iter_busy = True
        if p.enabled and p._running:
            if name not in p._known_stages and not _stages.is_stage(name):
                p._warn(("stage", name), "stage %r is not registered (register_stage(%r) lets configs select it)", name, name)
            p._known_stages.add(name)
            it = p._iteration
            if p.plan.stage_call_recorded(name, it):
                call = p._stage_calls[name] = p._stage_calls.get(name, 0) + 1
                self.cap = p._open_capture(name, it, it, 0, 0, call)
        if p._running:
            # after the capture started (a running on-demand capture sees the stage too)
            if observers.ITERATION_LISTENERS:
                self.subs = observers.enter_stage(observers.ITERATION_LISTENERS, p, name)
            if p.observers:
                self.subs = observers.enter_stage(p.observers, p, name, self.subs)
        # the stage's timeline span opens after the capture started and closes before it is
        # exported, so the timeline shows the stage's own time and the profiler's cost beside it
        if STATE.tracer is not None and p._request_id is None:
            self.span = p._tracer_enter(name, formats.CAT_STAGE, {"stage": name, "iteration": p._iteration})
        if p.enabled and p._running and STATE.capture_active:
            self.rng = _stage_range(p.backend, name)
        return self

    def __exit__(self, *exc: Any) -> bool:
        if self.rng is not None:
            impl, token = self.rng
            with contextlib.suppress(Exception):
                impl.end(token, "default")
        if self.span is not None:
            self.p._tracer_exit(self.span)
        if self.subs:
            observers.exit_stage(self.subs, exc)
        if self.cap is not None:
            self.p._close(self.cap)
        STATE.stage = self.prev
        return False


def _stage_range(backend: Backend | None, name: str):
    """(marker implementation, token) of a range drawing the stage inside the running capture
    (record_function for torch and torch_npu, the lightweight recorder's own buffer), or None."""
    from mindspeed_profiler.mstx import _load_marker

    impl = _load_marker(backend.stage_marker if backend is not None else "record_function")
    if impl is None:
        return None
    try:
        token = impl.start(name, "default", None)
    except Exception:
        return None
    return (impl, token) if token is not None else None
