"""What the modules around the profiler use of it, as typing Protocols: they type their profiler
parameters with these instead of `Any`, where importing profiler.py would close an import loop
(profiler.py imports the stage scope, the listener and the metrics tracker). IntegratedProfiler
satisfies every one of them. Types only: nothing here runs."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, ContextManager, Protocol

from mindspeed_profiler.capture.observers import ObservedProfiler

if TYPE_CHECKING:
    from mindspeed_profiler.backends import Backend
    from mindspeed_profiler.runtime.spans import Spans


class StageCaptures(Protocol):
    """What a stage scope uses of its profiler's captures (runtime/captures.py's Captures): the
    capture of one stage call, opened and closed (an opaque handle, or None)."""

    def stage_call(self, name: str, iteration: int) -> Any: ...

    def close(self, cap: Any) -> None: ...


class StageHost(ObservedProfiler, Protocol):
    """What a stage scope (stage_scope.py) reads and drives of its profiler."""

    enabled: bool
    iteration_busy: bool
    request_id: str | None
    observers: list[Any]
    spans: Spans
    capturing: StageCaptures | None
    running: bool

    @property
    def backend(self) -> Backend | None: ...


class Profiler(StageHost, Protocol):
    """A whole profiler, as the on-demand listener and the integrations drive it."""

    cfg: Any
    rank: int | None
    rank_selected: bool
    world_size: int | None
    captures: list[dict[str, Any]]

    def start(self, iteration: int = 1) -> None: ...

    def step(self, tokens: int | None = None, samples: int | None = None, **counts: int) -> None: ...

    def stop(self) -> None: ...

    def stage(self, name: str) -> ContextManager[Any]: ...

    def add_observer(self, observer: Any) -> None: ...

    def forget_after_fork(self) -> None: ...

    def for_request(self, cfg: Any, request_id: str, *, rank: int | None, world_size: int | None) -> Profiler: ...
