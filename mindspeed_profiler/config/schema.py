"""The typed, immutable config objects: each field declared once, on its dataclass, with its default
and its checker (`setting`); the section schemas (field name -> checker) are derived from them.

`integrated` keeps MindSpeed-RL's 15 field names, meanings and defaults verbatim, so a MindSpeed-RL
training YAML loads unchanged; our additions are optional and their defaults keep its behaviour."""
from __future__ import annotations

import os
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any, Mapping

from mindspeed_profiler.capture import stages as _stages
from mindspeed_profiler.config.checks import (
    AIC_METRICS, DEFAULT_SAVE_PATH, EXPORT_TYPES, MAX_ITERATION, PROFILE_LEVELS, TRACER_SINKS, backend_choices,
    check_auto_capture, check_bool, check_choice, check_declared_stages, check_dir_path, check_env_map, check_int, check_number,
    check_parallel_ranks, check_ranks, check_role_ranks, check_save_path, check_scalar_map, check_stage,
    check_step_list, check_str_list, check_worker_groups, rank_in, system_backend_choices,
)
from mindspeed_profiler.config.errors import ROOT_KEY, SECTIONS, Checker
from mindspeed_profiler.core.formats import METRICS_DIR, RUN_ID_KEY, SYSTEM_DIR

_CHECK = "check"  # metadata key: the field's checker
_MINDSPEED = "mindspeed"  # metadata key: one of MindSpeed-RL's 15 `integrated` fields


def setting(default: Any, check: Checker, *, mindspeed: bool = False) -> Any:
    """A config field: its default, its checker and, for `integrated`, whether MindSpeed-RL has it.

    A mapping default becomes a fresh read-only mapping per instance (dataclasses refuse shared
    mutable defaults).
    """
    metadata = {_CHECK: check, _MINDSPEED: mindspeed}
    if isinstance(default, Mapping):
        frozen = dict(default)
        return field(default_factory=lambda: MappingProxyType(dict(frozen)), metadata=metadata)
    return field(default=default, metadata=metadata)


@dataclass(frozen=True)
class IntegratedConfig:
    """`profiler_config.integrated`: MindSpeed-RL's fields first, then our optional additions."""

    # --- MindSpeed-RL fields (names, meanings and defaults verbatim) ---
    profile: bool = setting(False, check_bool, mindspeed=True)
    mstx: bool = setting(False, check_bool, mindspeed=True)
    stage: str | tuple[str, ...] = setting("all", check_stage, mindspeed=True)  # the stage registry is read at check time
    profile_save_path: str = setting(DEFAULT_SAVE_PATH, check_save_path, mindspeed=True)
    profile_export_type: str = setting("text", check_choice(EXPORT_TYPES), mindspeed=True)
    profile_step_start: int = setting(1, check_int(1, MAX_ITERATION), mindspeed=True)
    profile_step_end: int = setting(2, check_int(1, MAX_ITERATION + 1), mindspeed=True)
    profile_level: str = setting("level0", check_choice(PROFILE_LEVELS), mindspeed=True)
    profile_with_memory: bool = setting(False, check_bool, mindspeed=True)
    profile_record_shapes: bool = setting(False, check_bool, mindspeed=True)
    profile_with_cpu: bool = setting(True, check_bool, mindspeed=True)
    profile_with_npu: bool = setting(True, check_bool, mindspeed=True)
    profile_with_module: bool = setting(False, check_bool, mindspeed=True)
    profile_analysis: bool = setting(False, check_bool, mindspeed=True)
    profile_ranks: str | int | tuple[int, ...] = setting("all", check_ranks, mindspeed=True)
    # --- our additions (defaults keep MindSpeed behaviour) ---
    backend: str = setting("auto", check_choice(backend_choices))
    profile_steps: tuple[int, ...] | None = setting(None, check_step_list())
    warmup_steps: int = setting(0, check_int(0))
    trace_size_budget_mb: float | None = setting(None, check_number(0.0, optional=True))
    # host memory (MB) the process may grow by while one capture records (null: unbounded): past it the
    # capture stops at the next iteration boundary, with a note (docs/profiling.md, "Capture cost")
    capture_memory_budget_mb: float | None = setting(1024.0, check_number(0.0, optional=True))
    # the trace's compression, the memory snapshot's pickle and the final metadata written on a
    # background thread (runtime/export_writer.py); false: all of it inside the step, as torch does
    background_export: bool = setting(True, check_bool)
    # torch's stop and trace write once, when the run ends, not in the step closing each capture: one
    # torch.profiler session held across the windows, collection toggled (backends/held_session.py)
    export_after_run: bool = setting(False, check_bool)
    # how long stop() and interpreter exit wait for background exports (SIGTERM: at most 20 s)
    export_wait_s: float = setting(300.0, check_number(minimum=0.0, maximum=86400.0))
    profile_with_stack: bool = setting(False, check_bool)
    profile_with_flops: bool = setting(False, check_bool)
    aic_metrics: str | None = setting(None, check_choice(AIC_METRICS, optional=True))
    l2_cache: bool = setting(False, check_bool)
    data_simplification: bool = setting(True, check_bool)
    mstx_domain_include: tuple[str, ...] = setting((), check_str_list())
    mstx_domain_exclude: tuple[str, ...] = setting((), check_str_list())
    profile_parallel_ranks: Mapping[str, tuple[int, ...]] | None = setting(None, check_parallel_ranks)
    # listen for on-demand capture requests (mindspeed-profiler trigger; ondemand/), also with profile: false
    dynamic: bool = setting(False, check_bool)
    # capture the N iterations after one slower than `factor` x its running median, itself (ondemand/auto_capture.py):
    # None (off), else the mapping of config/checks.py AUTO_CAPTURE_KEYS with every key
    auto_capture: Mapping[str, Any] | None = setting(None, check_auto_capture)
    # per-role rank selection (verl's per-role profiler.enable / all_ranks / ranks): a role not listed captures nothing
    role_ranks: Mapping[str, str | int | tuple[int, ...]] | None = setting(None, check_role_ranks)
    # false: each recorded step is its own capture (verl's profile_continuous_steps: false)
    profile_steps_continuous: bool = setting(True, check_bool)
    # the trainer's own stage names (e.g. MindSpeed-RL's actor_image_embeds), so `stage` may select them
    register_stages: tuple[str, ...] = setting((), check_declared_stages)

    @property
    def stages(self) -> tuple[str, ...] | None:
        """The selected stage names, or None for `all`."""
        if self.stage == _stages.ALL:
            return None
        return (self.stage,) if isinstance(self.stage, str) else tuple(self.stage)

    @property
    def step_runs(self) -> tuple[tuple[int, int], ...]:
        """The iterations to capture as runs of consecutive ones, (first, last) inclusive: what the
        runtime uses, in constant memory however large the window (`profile_step_end: 10**9`)."""
        if self.profile_steps is not None:
            from mindspeed_profiler.capture.schedule import runs

            return tuple(runs(self.profile_steps))
        return ((self.profile_step_start, self.profile_step_end - 1),)

    def step_recorded(self, iteration: int) -> bool:
        return any(first <= iteration <= last for first, last in self.step_runs)

    @property
    def steps(self) -> tuple[int, ...]:
        """The 1-based iterations to capture, listed: the explicit list, else [start, end). For
        reading a config; the runtime never lists a window (it uses step_runs)."""
        if self.profile_steps is not None:
            return self.profile_steps
        return tuple(range(self.profile_step_start, self.profile_step_end))

    def rank_selected(self, rank: int, role: str | None = None) -> bool:
        """Whether `rank` captures: profile_ranks, and with `role` given and role_ranks set, that
        role's own ranks too (a role role_ranks does not list selects no rank)."""
        if role is not None and self.role_ranks is not None:
            if role not in self.role_ranks or not rank_in(self.role_ranks[role], rank):
                return False
        return rank_in(self.profile_ranks, rank)

    def stage_selected(self, stage: str) -> bool:
        selected = self.stages
        return selected is None or stage in selected


@dataclass(frozen=True)
class TracerConfig:
    """`profiler_config.tracer`: the cross-worker timeline (RLinf's cluster.tracer, done better)."""

    enable: bool = setting(False, check_bool)
    output_dir: str | None = setting(None, check_dir_path)  # default: <profile_save_path>/timeline
    flush_every_events: int = setting(4096, check_int(1))
    # the flusher thread sleeps this long between flushes: too short spins a core, too long never flushes
    flush_interval_s: float = setting(2.0, check_number(minimum=0.01, maximum=3600.0))
    buffer_max_events: int = setting(1_000_000, check_int(1))
    sink: str = setting("file", check_choice(TRACER_SINKS))
    clock_sync: bool = setting(True, check_bool)
    clock_sync_rounds: int = setting(8, check_int(1))
    gzip: bool = setting(False, check_bool)


@dataclass(frozen=True)
class SystemConfig:
    """`profiler_config.system`: process-level capture of Ray worker groups (RLinf's
    cluster.profiling): nsys, rocprof-sys, msprof or py-spy wraps each listed group's worker
    processes (mindspeed_profiler/system/, docs/system-profiling.md)."""

    backend: str = setting("nsight", check_choice(system_backend_choices))
    enabled: bool = setting(True, check_bool)
    worker_groups: str | tuple[str, ...] | None = setting(None, check_worker_groups)  # "all", names, or None
    steps: tuple[int, ...] | None = setting(None, check_step_list())
    output_dir: str | None = setting(None, check_dir_path)  # default: <profile_save_path>/system
    options: Mapping[str, str] = setting({}, check_scalar_map)
    flags: tuple[str, ...] = setting((), check_str_list())
    args: Mapping[str, str] = setting({}, check_scalar_map)
    env: Mapping[str, str] = setting({}, check_env_map)


@dataclass(frozen=True)
class MetricsConfig:
    """`profiler_config.metrics`: per-iteration timings, throughput and MFU, one JSON line per
    iteration per worker (metrics/, docs/metrics.md); independent of `integrated.profile`."""

    enable: bool = setting(False, check_bool)
    output_dir: str | None = setting(None, check_dir_path)  # default: <profile_save_path>/metrics
    # TFLOPS of one device (dense BF16 / FP16); null: the table's for the device (metrics/peaks.py), none on a CPU
    peak_tflops: float | None = setting(None, check_number(0.0, optional=True))
    # the parameters a token passes through; null: the model given to set_model()
    parameters: int | None = setting(None, check_int(1, optional=True))
    tensorboard: bool = setting(False, check_bool)
    # memory (docs/memory.md): the device allocator's history kept all run long, a ring of
    # oom_snapshot_entries events with oom_snapshot_stacks, dumped when an out-of-memory error escapes a stage
    oom_snapshot: bool = setting(False, check_bool)
    oom_snapshot_entries: int = setting(100_000, check_int(1, 10_000_000))
    oom_snapshot_stacks: str = setting("python", check_choice(("python", "all")))
    # a share of the host memory this process may use (its cgroup's limit, else the machine's): its resident
    # memory past it writes one record per crossing; null: off
    host_memory_watermark: float | None = setting(0.9, check_number(optional=True, minimum=1e-6, maximum=1.0))


@dataclass(frozen=True)
class ProfilerConfig:
    """The whole validated `profiler_config` block."""

    integrated: IntegratedConfig = field(default_factory=IntegratedConfig)
    tracer: TracerConfig = field(default_factory=TracerConfig)
    system: SystemConfig | None = None
    metrics: MetricsConfig = field(default_factory=MetricsConfig)
    # Not a setting: the id of the run this config drives, set by manifest.start_run on the driver
    # and carried to the workers with the config (`profiler_config.run_id`).
    run_id: str | None = None

    @property
    def timeline_dir(self) -> str:
        return self.tracer.output_dir or os.path.join(self.integrated.profile_save_path, "timeline")

    @property
    def metrics_output_dir(self) -> str:
        return self.metrics.output_dir or os.path.join(self.integrated.profile_save_path, METRICS_DIR)

    @property
    def system_output_dir(self) -> str:
        default = os.path.join(self.integrated.profile_save_path, SYSTEM_DIR)
        return (self.system.output_dir if self.system else None) or default

    def to_dict(self) -> dict[str, Any]:
        """Plain, YAML-friendly dict (lists for tuples) of the normalized config."""
        block = {name: plain(getattr(self, name)) for name in SECTIONS if getattr(self, name) is not None}
        if self.run_id is not None:
            block[RUN_ID_KEY] = self.run_id
        return {ROOT_KEY: block}

    def to_yaml(self) -> str:
        import yaml

        return yaml.safe_dump(self.to_dict(), sort_keys=False)


def plain(value: Any) -> Any:
    if hasattr(value, "__dataclass_fields__"):
        return {f.name: plain(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return [plain(v) for v in value]
    return value


def schema_of(cls: type) -> Mapping[str, Checker]:
    missing = [f.name for f in fields(cls) if _CHECK not in f.metadata]
    if missing:
        raise TypeError(f"{cls.__name__} fields without a checker: {', '.join(missing)}; declare them with setting()")
    return MappingProxyType({f.name: f.metadata[_CHECK] for f in fields(cls)})


INTEGRATED_FIELDS = schema_of(IntegratedConfig)
TRACER_FIELDS = schema_of(TracerConfig)
SYSTEM_FIELDS = schema_of(SystemConfig)
METRICS_FIELDS = schema_of(MetricsConfig)
# MindSpeed-RL's 15 `integrated` fields, in its order
MINDSPEED_FIELDS = tuple(f.name for f in fields(IntegratedConfig) if f.metadata[_MINDSPEED])

SECTION_SCHEMAS: Mapping[str, Mapping[str, Checker]] = MappingProxyType(
    {"integrated": INTEGRATED_FIELDS, "tracer": TRACER_FIELDS, "system": SYSTEM_FIELDS, "metrics": METRICS_FIELDS}
)

# Other frameworks' spellings of a field, accepted at load as the field itself (docs/glossary.md):
# every section's switch reads `enable`, `enabled` or its own name; verl's order of words for the
# continuous-steps flag. A field given under two of its names is a problem.
FIELD_ALIASES: Mapping[str, Mapping[str, str]] = MappingProxyType({
    "integrated": MappingProxyType({"enable": "profile", "profile_continuous_steps": "profile_steps_continuous"}),
    "tracer": MappingProxyType({"enabled": "enable"}),
    "system": MappingProxyType({"enable": "enabled"}),
    "metrics": MappingProxyType({"enabled": "enable"}),
})
