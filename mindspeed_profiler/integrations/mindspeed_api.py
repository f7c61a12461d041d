"""MindSpeed-RL-style functions over IntegratedProfiler: get_profiler, profiler_start, profiler_step."""
from __future__ import annotations

from typing import Any

from mindspeed_profiler.runtime.manifest import split_config
from mindspeed_profiler.runtime.profiler import IntegratedProfiler
from mindspeed_profiler.runtime.stage_scope import StageScope

__all__ = ["get_profiler", "profiler_start", "profiler_step"]


class StageShot:
    """What `profiler_start(cfg, stage, profiler_iteration=N)` returns: one capture of one stage
    call; `step()` (or `stop()`) ends it."""

    def __init__(self, prof: IntegratedProfiler, stage: str, iteration: int):
        self.profiler = prof
        prof.start(iteration=iteration)
        self._scope: StageScope | None = StageScope(prof, stage)
        self._scope.__enter__()

    def step(self) -> None:
        if self._scope is not None:
            scope, self._scope = self._scope, None
            scope.__exit__(None, None, None)
            self.profiler.stop()

    stop = step


def get_profiler(cfg: Any, role: str = "integrated", **kwargs: Any) -> IntegratedProfiler:
    """MindSpeed-style: build (not start) the profiler for `role`."""
    return IntegratedProfiler(cfg, role, **kwargs)


def profiler_start(cfg: Any, role: str = "integrated", profiler_iteration: int | None = None, **kwargs: Any):
    """MindSpeed-style start. Without `profiler_iteration`: start the role's profiler (None when
    profiling is off). With it: `role` names a stage, and when the config selects that stage and
    iteration, one capture of this call starts now (profiler_step ends it); else None."""
    _, integ = split_config(cfg)
    if not integ.profile:
        return None
    if profiler_iteration is None:
        prof = IntegratedProfiler(cfg, role, **kwargs)
        prof.start()
        return prof
    if integ.stages is None or not integ.stage_selected(role) or not integ.step_recorded(profiler_iteration):
        return None
    worker_role = kwargs.pop("worker_role", role)
    return StageShot(IntegratedProfiler(cfg, worker_role, iteration_spans=False, **kwargs), role, profiler_iteration)


def profiler_step(profiler: IntegratedProfiler | StageShot | None) -> None:
    """MindSpeed-style step: no-op on None."""
    if profiler is not None:
        profiler.step()
