"""`record_samples(items, stage, profiler=None)`: per-sample records for code that holds no
profiler object (an engine wrapper, MindSpeed-RL's vLLM engine): the samples go to this process's
running profiler (runtime/session.RUNNING)."""
from __future__ import annotations

from typing import Any, Iterable

from mindspeed_profiler.core.warn import warn_once
from mindspeed_profiler.rollout.recorder import check_arguments
from mindspeed_profiler.runtime import session


def running_profiler() -> Any:
    """This process's running profiler that samples go to: the only one, else (colocated roles,
    on-demand children) a worker-level one, the first by role; None when none runs."""
    running = list(session.RUNNING)
    own = [p for p in running if getattr(p, "request_id", None) is None] or running
    if not own:
        return None
    own.sort(key=lambda p: str(p.role))
    roles = sorted({str(p.role) for p in own})
    if len(roles) > 1:
        warn_once(("record_samples", "several", tuple(roles)), "record_samples: several profilers run in this process "
                  "(roles %s): samples go to %r's; pass profiler= to choose", ", ".join(roles), roles[0])
    return own[0]


def record_samples(items: Iterable[Any], stage: str = "actor_generate", profiler: Any = None, *,
                   clock: str | None = None, policy_version: int | None = None) -> int:
    """Record `items` (vLLM RequestOutputs, SGLang result dicts, plain sample dicts:
    docs/rollout.md) for `stage` with `profiler` (an IntegratedProfiler, or what MindSpeed-RL's
    profiler_start returns), else with this process's running profiler. With none running: one
    warning, nothing recorded, 0. `policy_version`: the weights' version that generated the items,
    for those that do not say (a RequestOutput never does). Returns how many items were taken. Bad
    arguments: ValueError."""
    check_arguments(items, stage, clock, policy_version)
    target = profiler if profiler is not None else running_profiler()
    if target is None:
        warn_once(("record_samples", "none-running"), "record_samples: no profiler is running in this process: samples "
                  "not recorded (start one, or pass profiler=)")
        return 0
    if not hasattr(target, "record_samples"):   # MindSpeed-style StageShot: its profiler
        target = getattr(target, "profiler", None)
    if not hasattr(target, "record_samples"):
        raise ValueError(f"record_samples(profiler=...): a {type(profiler).__name__} is not a profiler; allowed: an "
                         "IntegratedProfiler, what profiler_start / get_grpo_profiler return, or None (the running one)")
    if policy_version is None:   # a profiler that predates the argument (or a user's own) is called as before
        return target.record_samples(items, stage, clock=clock)
    return target.record_samples(items, stage, clock=clock, policy_version=policy_version)
