"""One schema for the whole `profiler_config` block: `integrated`, `tracer`, `system`, `metrics`.

`integrated` keeps MindSpeed-RL's 15 field names, meanings and defaults verbatim, so a MindSpeed-RL
training YAML loads unchanged; our additions are optional and their defaults keep MindSpeed's
behaviour. Everything is validated at load time (on the driver, before any worker starts) and
every problem is reported together in one `ProfilerConfigError`.

    errors.py      ProfilerConfigError and the words messages share (ROOT_KEY, SECTIONS)
    checks.py      the field checkers and the limits they enforce
    schema.py      the typed, immutable config objects; each field declared once, with its checker
    validate.py    sections, then cross-field rules (the system section's: config/system_rules.py)
    containers.py  plain data from OmegaConf/Hydra containers; the block's one deep copy
    load.py        load_config, the one entry point, in one pass: read, layout detected once,
                   translated, overrides applied (each parsed once), validated
    dialects/      MindSpeed-RL, verl and RLinf settings read as ours (`detect`, `Layout.translate`)

Every name below is importable from `mindspeed_profiler.config` as it was when this was one module.
"""
from __future__ import annotations

from mindspeed_profiler.config.checks import (
    AIC_METRICS,
    ALL_GROUPS,
    DEFAULT_SAVE_PATH,
    ENV_NAME_RE,
    EXPORT_TYPES,
    MAX_ITERATION,
    MAX_OVERRIDE_DEPTH,
    MAX_UNKNOWN_REPORTED,
    MAX_YAML_NODES,
    NAME_MAX,
    PARALLEL_DIMS,
    PATH_MAX,
    PROFILE_LEVELS,
    TRACER_SINKS,
    backend_choices,
    system_backend_choices,
)
from mindspeed_profiler.config.containers import to_container
from mindspeed_profiler.config.errors import MISSING, ROOT_KEY, SECTIONS, Checker, ProfilerConfigError
from mindspeed_profiler.config.load import Override, load_config, parse_override, read_source, split_overrides
from mindspeed_profiler.config.schema import (
    INTEGRATED_FIELDS,
    METRICS_FIELDS,
    MINDSPEED_FIELDS,
    SECTION_SCHEMAS,
    SYSTEM_FIELDS,
    TRACER_FIELDS,
    IntegratedConfig,
    MetricsConfig,
    ProfilerConfig,
    SystemConfig,
    TracerConfig,
    plain,
    setting,
)
from mindspeed_profiler.config.validate import validate

# Process-level capture of Ray worker groups is built (mindspeed_profiler/system/): an enabled
# `system` section wraps the listed groups. (Before it was, `enabled: true` was refused at load.)
SYSTEM_CAPTURE_AVAILABLE = True

__all__ = [
    "AIC_METRICS", "ALL_GROUPS", "DEFAULT_SAVE_PATH", "ENV_NAME_RE", "EXPORT_TYPES", "INTEGRATED_FIELDS",
    "MAX_ITERATION", "MAX_OVERRIDE_DEPTH", "METRICS_FIELDS", "MetricsConfig", "MAX_UNKNOWN_REPORTED", "MAX_YAML_NODES", "MINDSPEED_FIELDS", "MISSING",
    "NAME_MAX", "PARALLEL_DIMS", "PATH_MAX", "PROFILE_LEVELS", "ROOT_KEY", "SECTIONS", "SECTION_SCHEMAS",
    "SYSTEM_CAPTURE_AVAILABLE", "SYSTEM_FIELDS", "TRACER_FIELDS", "TRACER_SINKS", "Checker", "IntegratedConfig",
    "Override", "ProfilerConfig", "ProfilerConfigError", "SystemConfig", "TracerConfig", "backend_choices",
    "load_config", "parse_override", "plain", "read_source", "setting", "split_overrides", "system_backend_choices",
    "to_container", "validate",
]
