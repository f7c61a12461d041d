"""What one profiler writes beside its captures: warnings once per profiler, and its own spans on
this process's timeline (iterations, stages, exports). Never raises."""
from __future__ import annotations

from typing import Any, Hashable

from mindspeed_profiler.core.state import STATE
from mindspeed_profiler.core.warn import new_scope, warn_once


class ScopedWarn:
    """warn_once per profiler: two colocated profilers each report their own failure."""

    __slots__ = ("scope",)

    def __init__(self) -> None:
        self.scope = new_scope()

    def __call__(self, key: tuple[Hashable, ...], msg: str, *args: Any) -> None:
        warn_once((self.scope,) + key, msg, *args)


class Spans:
    """The profiler's spans on this process's timeline. The process is named once, by the tracer
    (its segment header's role and rank, which the merge puts on every span): the profiler adds no
    name of its own, and says once when the two were given different roles."""

    __slots__ = ("role", "warn")

    def __init__(self, role: str, warn: ScopedWarn):
        self.role = role
        self.warn = warn

    def enter(self, name: str, cat: str, args: dict[str, Any]) -> Any:
        """An open span, or None (no tracer, or it failed: warned once)."""
        try:
            from mindspeed_profiler.tracing import trace_span

            rec = STATE.tracer
            if rec is not None and rec.role != self.role:
                self.warn(("identity", rec.role), "this process is %r to the tracer and %r to the profiler: the timeline "
                          "names it %s:%s (give init_tracer and the profiler the same role)", rec.role, self.role,
                          rec.role, rec.rank)
            span = trace_span(name, cat=cat, args=args)
            span.__enter__()
            return span
        except Exception as exc:
            self.warn(("tracer", type(exc).__name__), "tracer span %r failed: %s: %s", name, type(exc).__name__, exc)
            return None

    def exit(self, span: Any) -> None:
        try:
            span.__exit__(None, None, None)
        except Exception as exc:
            self.warn(("tracer-exit", type(exc).__name__), "tracer span end failed: %s: %s", type(exc).__name__, exc)
