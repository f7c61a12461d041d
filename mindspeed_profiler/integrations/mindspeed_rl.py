"""MindSpeed-RL drop-in: its profiler functions with exactly its names, signatures, return values
and None semantics, running on mindspeed-profiler. Porting a MindSpeed-RL worker is one import line:

    # from mindspeed_rl.utils.utils import get_grpo_profiler, profiler_start, profiler_step, mstx_timer_decorator
    from mindspeed_profiler.integrations.mindspeed_rl import (
        get_grpo_profiler,
        profiler_start,
        profiler_step,
        mstx_timer_decorator,
        record_samples,   # ours: per-sample records of generate_sequences' RequestOutputs (docs/rollout.md)
    )

What they accept as `profiler_config`: None (profiling off), MindSpeed-RL's own `ProfilerConfig`
(any object with its attributes: `role`, `profile`, `stage`, `profile_step_start`, ...), a plain dict
of the `integrated` section (hyphenated keys accepted, as MindSpeed-RL's loader does), or ours
(`load_config(...)` or its `.integrated`). Their semantics, kept (mindspeed_rl/utils/utils.py):

- `get_grpo_profiler(cfg, role=None)`: None when profiling is off or this rank is not selected;
  else a profiler, not started, capturing iterations [profile_step_start, profile_step_end) counted
  from its start() (stage: all), or the one call it is started for (a named stage).
- `profiler_start(cfg, role="profiler_data", profiler_iteration=None)`: None unless this call is
  selected: an iteration outside the window, a stage not selected, or (stage: all) a role other
  than the config's own role; else the started profiler. The worker-level call is
  `profiler_start(cfg, cfg.role)` at the end of worker init; a stage call passes the stage name as
  the role and the 1-based `profiler_iteration`.
- `profiler_step(profiler)`: a no-op on None.
- With our `dynamic: true` (on-demand capture, docs/ondemand.md), the worker-level call always
  returns a started, listening profiler (also with `profile: false`), and a stage call it does not
  capture returns a stage of that profiler (never None): `mindspeed-profiler trigger` reaches it.
- `mstx_timer_decorator(func)`: a range named after the function's qualified name around each call.
- `record_samples(outputs, stage="actor_generate")` (ours, no MindSpeed-RL counterpart): the
  RequestOutputs of vLLM run inside the actor (integrated mode) as per-sample records, written by
  the process's running profiler; none running: one warning, nothing recorded (docs/rollout.md,
  "Recording samples", gives the line to add to MindSpeed-RL's VLLMInferEngine.generate_sequences).

What differs, on purpose: captures follow our layout (`<save>/<stage or all>/<role>_rank<R>_step<A>-<B>_...`,
docs/formats.md; MindSpeed-RL wrote `<save>/<role>/<host>_<pid>_<time>_ascend_pt`), every capture
has metadata, a profiler failure never stops the worker, the decorated function's range is closed
when it raises, and it runs on GPUs and CPUs too. Stage names in the config that our stage registry
does not know (their multimodal `actor_image_embeds`, ...) are registered, as MindSpeed-RL accepts
any name.
"""
from __future__ import annotations

import weakref
from typing import Any, Mapping

from mindspeed_profiler.capture import stages as _stages
from mindspeed_profiler.config import MINDSPEED_FIELDS, ProfilerConfig, IntegratedConfig, load_config
from mindspeed_profiler.integrations.mindspeed_api import StageShot
from mindspeed_profiler.runtime.mstx import mstx_timer_decorator as _marker
from mindspeed_profiler.runtime.profiler import IntegratedProfiler
from mindspeed_profiler.runtime.ranks import resolve_rank
from mindspeed_profiler.rollout.api import record_samples

__all__ = ["get_grpo_profiler", "profiler_start", "profiler_step", "mstx_timer_decorator", "record_samples", "as_config"]

DEFAULT_ROLE = "integrated"   # MindSpeed-RL's trainers build ProfilerConfig(..., role="integrated")
_cache: dict[Any, tuple[ProfilerConfig, str]] = {}


def _freeze(v: Any) -> Any:
    if isinstance(v, Mapping):
        return tuple(sorted((k, _freeze(x)) for k, x in v.items()))
    if isinstance(v, (list, tuple)):
        return tuple(_freeze(x) for x in v)
    return v


def as_config(profiler_config: Any) -> tuple[ProfilerConfig, str] | None:
    """(our validated config, the config's role) from anything MindSpeed-RL code passes, or None
    for None / a falsy value. Converted once per distinct content (stage calls reuse it)."""
    if not profiler_config:
        return None
    if isinstance(profiler_config, ProfilerConfig):
        return profiler_config, DEFAULT_ROLE
    if isinstance(profiler_config, IntegratedConfig):
        return ProfilerConfig(integrated=profiler_config), DEFAULT_ROLE
    if isinstance(profiler_config, Mapping):
        fields = {str(k).replace("-", "_"): v for k, v in profiler_config.items()}
    else:   # MindSpeed-RL's ProfilerConfig, or any object with its attributes
        fields = {k: getattr(profiler_config, k) for k in ("role",) + MINDSPEED_FIELDS if hasattr(profiler_config, k)}
    role = str(fields.pop("role", "") or DEFAULT_ROLE)
    key = _freeze(fields), role
    if key not in _cache:
        block = {k: v for k, v in fields.items()}
        _register_stages(block.get("stage"))
        cfg = load_config({"integrated": block}, check_paths=False)
        _cache[key] = cfg, role
    return _cache[key]


def _register_stages(stage: Any) -> None:
    names = [stage] if isinstance(stage, str) else list(stage) if isinstance(stage, (list, tuple)) else []
    for name in names:
        if isinstance(name, str) and name.lower() != _stages.ALL and not _stages.is_stage(name):
            _stages.register_stage(name, owner="mindspeed_rl")


def _rank_selected(cfg: ProfilerConfig, role: str) -> bool:
    return cfg.integrated.rank_selected(resolve_rank()[0], role)


def get_grpo_profiler(profiler_config: Any, role: str = None):
    """MindSpeed-RL's get_grpo_profiler: a profiler for `role` (not started), or None when
    profiling is off or this rank is not selected."""
    got = as_config(profiler_config)
    if got is None or not got[0].integrated.profile or not _rank_selected(got[0], role or got[1]):
        return None
    cfg, cfg_role = got
    return IntegratedProfiler(cfg, role or cfg_role)


def profiler_start(profiler_config: Any, role: str = "profiler_data", profiler_iteration: int = None):
    """MindSpeed-RL's profiler_start: the started profiler of this call, or None (see module doc)."""
    got = as_config(profiler_config)
    if got is None:
        return None
    cfg, cfg_role = got
    integ = cfg.integrated
    shot = _selected_call(cfg, cfg_role, role, profiler_iteration)
    return _listening(shot, cfg, cfg_role, role, profiler_iteration) if integ.dynamic else shot


def _selected_call(cfg: ProfilerConfig, cfg_role: str, role: str, profiler_iteration: int | None):
    """MindSpeed-RL's own semantics: the started profiler of a selected call, else None."""
    integ = cfg.integrated
    if profiler_iteration is not None and not (integ.profile_step_start <= profiler_iteration < integ.profile_step_end):
        return None
    if integ.stages is not None and role not in integ.stages:
        return None
    if integ.stages is None and role != cfg_role:
        return None
    if not integ.profile or not _rank_selected(cfg, _worker_role(cfg_role)):
        return None
    if integ.stages is None:   # the worker-level profiler: the whole window, stepped once per iteration
        prof = IntegratedProfiler(cfg, _worker_role(cfg_role))
        prof.start()
        return prof
    # one capture of this stage call, at its iteration (the window's first when the caller does not say)
    iteration = profiler_iteration if profiler_iteration is not None else integ.step_runs[0][0]
    return StageShot(IntegratedProfiler(cfg, _worker_role(cfg_role), iteration_spans=False), role, iteration)


# the worker-level listening profiler of each config (on-demand capture), for its stage calls
_LISTENERS: "weakref.WeakValueDictionary[int, IntegratedProfiler]" = weakref.WeakValueDictionary()


def _listening(shot: Any, cfg: ProfilerConfig, cfg_role: str, role: str, profiler_iteration: int | None):
    """`dynamic: true` (on-demand capture): the worker-level call (`profiler_start(cfg, cfg.role)`,
    stepped by profiler_step once per update) returns a started profiler, which listens for
    requests, also when the call captures nothing itself (`profile: false`, named stages, a rank
    not selected); a stage call that captures nothing (`shot` None) runs as a stage of that
    profiler, so that a request for named stages sees it. Otherwise `shot`, as without dynamic."""
    if profiler_iteration is None and role == cfg_role:
        if shot is None:
            shot = IntegratedProfiler(cfg, _worker_role(cfg_role))
            shot.start()
        _LISTENERS[id(cfg)] = shot   # the config is cached (as_config): its id names it while it lives
        return shot
    owner = _LISTENERS.get(id(cfg))
    if shot is None and owner is not None and profiler_iteration is not None:
        return _ListeningStage(owner, role)
    return shot


class _ListeningStage:
    """A stage call of a listening worker profiler: profiler_step (its step or stop) ends it."""

    def __init__(self, owner: IntegratedProfiler, stage: str):
        self._scope: Any = owner.stage(stage)
        self._scope.__enter__()

    def step(self) -> None:
        if self._scope is not None:
            scope, self._scope = self._scope, None
            scope.__exit__(None, None, None)

    stop = step


def _worker_role(cfg_role: str) -> str:
    """The process's name for a stage capture's directory: the Ray actor's name, else the config's role."""
    from mindspeed_profiler.integrations.ray import actor_role

    return actor_role(default=cfg_role)


def profiler_step(profiler: IntegratedProfiler | StageShot | None) -> None:
    """MindSpeed-RL's profiler_step: step (a stage capture: end) the profiler; a no-op on None."""
    if profiler:
        profiler.step()


def mstx_timer_decorator(func):
    """MindSpeed-RL's mstx_timer_decorator (a range per call, named by the function's qualname),
    closed also when the function raises; mstx on NPU, NVTX on CUDA, record_function on CPU."""
    return _marker(func)
