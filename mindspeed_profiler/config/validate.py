"""Validation of a `profiler_config` mapping: each section's fields checked, then the cross-field
rules; every problem reported together. It registers nothing: the stages a config declares
(`register_stages`) count for its own `stage` while it is checked, and are registered once it is
accepted. The system section's rules live with the system backends (config/system_rules.py)."""
from __future__ import annotations

import os
from types import MappingProxyType
from typing import Any, Mapping

from mindspeed_profiler.capture import stages as _stages
from mindspeed_profiler.config.checks import (
    DEFAULT_SAVE_PATH, MAX_UNKNOWN_REPORTED, check_auto_capture, check_stage, unwritable,
)
from mindspeed_profiler.config.errors import (
    BAD,
    MISSING,
    ROOT_KEY,
    SECTIONS,
    Problems,
    ProfilerConfigError,
    describe,
    hint,
)
from mindspeed_profiler.config.schema import (
    FIELD_ALIASES, SECTION_SCHEMAS, IntegratedConfig, MetricsConfig, ProfilerConfig, SystemConfig, TracerConfig,
)
from mindspeed_profiler.core.formats import METRICS_DIR, RUN_ID_KEY, RUN_ID_RE
from mindspeed_profiler.config.system_rules import check_system

# integrated fields that name a stage: their checkers take the config's own register_stages
_STAGE_NAMING = {"stage": check_stage, "auto_capture": check_auto_capture}


def field_keys(raw: Mapping[str, Any], schema: Mapping[str, Any], path: str, problems: Problems,
               aliases: Mapping[str, str] = MappingProxyType({})) -> dict[str, Any]:
    """The section's keys as fields: `profile-ranks` is `profile_ranks` (MindSpeed-RL's loader reads
    '-' as '_'), another framework's spelling (`aliases`, schema.FIELD_ALIASES) is the field it
    names; a field given under two names is a problem. `register_stages` comes first so that
    `stage` may name what it declares."""
    out: dict[Any, Any] = {}
    written: dict[Any, Any] = {}
    for key, value in raw.items():
        name = key
        if isinstance(key, str) and key not in schema:
            under = key.replace("-", "_")
            name = under if under in schema else aliases.get(under, key)
        if name in out:
            why = "'-' reads as '_'" if written[name].replace("-", "_") == str(key).replace("-", "_") else \
                "both name one field (docs/glossary.md)"
            problems.append((f"{path}.{name}", f"is given twice, as {written[name]!r} and {key!r} ({why}); keep one"))
            continue
        out[name], written[name] = value, key
    first = {k: out.pop(k) for k in ("register_stages",) if k in out}
    return {**first, **out}


def check_section(name: str, raw: Any, problems: Problems) -> dict[str, Any] | None:
    """Type-check one section; returns its normalized fields (bad ones omitted) or None."""
    path = f"{ROOT_KEY}.{name}"
    schema = SECTION_SCHEMAS[name]
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        problems.append((path, f"got {describe(raw)}; expected a mapping of fields"))
        return None
    raw = field_keys(raw, schema, path, problems, FIELD_ALIASES.get(name, {}))
    out: dict[str, Any] = {}
    unknown = 0
    for key, value in raw.items():
        if key not in schema:
            unknown += 1
            if unknown > MAX_UNKNOWN_REPORTED:   # thousands of keys: the first ones say enough (and hints cost time)
                continue
            text = str(key)
            shown = text if len(text) <= 80 else text[:80] + "..."
            where = f"{path}.{shown}"
            # a field placed in the wrong section is a common slip: say where it belongs
            home = next((s for s, sch in SECTION_SCHEMAS.items() if s != name and key in sch), None)
            also = f"; {key!r} is a field of {ROOT_KEY}.{home}" if home else ""
            tip = hint(key, schema) if len(text) <= 100 else ""
            problems.append((where, f"unknown key {shown!r}{tip}{also}; valid keys: {', '.join(schema)}"))
            continue
        if value == MISSING:
            problems.append((f"{path}.{key}", f"is {MISSING!r}, OmegaConf/Hydra's missing value: set it in the YAML or with an override"))
            continue
        if name == "integrated" and key in _STAGE_NAMING:   # the config's own register_stages count (checked first)
            checked = _STAGE_NAMING[key](value, f"{path}.{key}", problems, declared=out.get("register_stages", ()))
        else:
            checked = schema[key](value, f"{path}.{key}", problems)
        if checked is not BAD:
            out[key] = checked
    if unknown > MAX_UNKNOWN_REPORTED:
        problems.append((path, f"{unknown - MAX_UNKNOWN_REPORTED} more unknown key(s) not listed ({unknown} in all)"))
    return out


def check_integrated(f: dict[str, Any], had_bad: bool, problems: Problems, check_paths: bool) -> None:
    p = f"{ROOT_KEY}.integrated"
    d = IntegratedConfig()
    start = f.get("profile_step_start", d.profile_step_start)
    end = f.get("profile_step_end", d.profile_step_end)
    if "profile_step_start" in f or "profile_step_end" in f or not had_bad:
        if isinstance(start, int) and isinstance(end, int) and not start < end:
            problems.append((f"{p}.profile_step_end", f"got profile_step_start={start}, profile_step_end={end}; the window [start, end) "
                             f"is empty: need 1 <= profile_step_start < profile_step_end (e.g. start={start}, end={start + 1})"))
    include, exclude = f.get("mstx_domain_include", ()), f.get("mstx_domain_exclude", ())
    if include and exclude:
        problems.append((f"{p}.mstx_domain_exclude", "mstx_domain_include and mstx_domain_exclude cannot both be set (torch_npu accepts one)"))
    profile = f.get("profile", d.profile)
    if check_paths and profile and "profile_save_path" in f:
        msg = unwritable(f["profile_save_path"])
        if msg:
            problems.append((f"{p}.profile_save_path", msg))


def validate(block: Mapping[str, Any], *, check_paths: bool = True) -> ProfilerConfig:
    """Validate a `profiler_config` mapping (with integrated / tracer / system / metrics keys)."""
    problems: list[tuple[str, str]] = []
    if not isinstance(block, Mapping):
        raise ProfilerConfigError([(ROOT_KEY, f"got {describe(block)}; expected a mapping")])
    for key in block:
        if key not in SECTIONS and key != RUN_ID_KEY:
            problems.append((f"{ROOT_KEY}.{key}", f"unknown section {key!r}{hint(key, SECTIONS)}; valid sections: {', '.join(SECTIONS)}"))
    run_id = block.get(RUN_ID_KEY)
    if run_id is not None and not (isinstance(run_id, str) and RUN_ID_RE.match(run_id)):
        problems.append((f"{ROOT_KEY}.{RUN_ID_KEY}", f"got {describe(run_id)}; expected up to 64 letters, digits, '.', '_' "
                                                     "or '-' (it is set by start_run on the driver; leave it out)"))
    n_before = len(problems)
    integ = check_section("integrated", block.get("integrated"), problems)
    integ_bad = len(problems) > n_before
    tracer = check_section("tracer", block.get("tracer"), problems)
    system_raw = block.get("system")
    system = check_section("system", system_raw, problems) if system_raw is not None else None
    metrics = check_section("metrics", block.get("metrics"), problems)
    if integ is not None:
        check_integrated(integ, integ_bad, problems, check_paths)
    save_path = (integ or {}).get("profile_save_path", DEFAULT_SAVE_PATH)
    if tracer and tracer.get("enable") and check_paths:
        out = tracer.get("output_dir") or os.path.join(save_path, "timeline")
        msg = unwritable(out)
        if msg:
            problems.append((f"{ROOT_KEY}.tracer.output_dir", msg))
    if metrics and metrics.get("enable") and check_paths:
        out = metrics.get("output_dir") or os.path.join(save_path, METRICS_DIR)
        msg = unwritable(out)
        if msg:
            problems.append((f"{ROOT_KEY}.metrics.output_dir", msg))
    if system is not None and isinstance(system_raw, Mapping):
        check_system(system, system_raw, problems, check_paths, save_path)
    if problems:
        raise ProfilerConfigError(problems)
    for stage_name in (integ or {}).get("register_stages", ()):   # accepted: its stages are known in this process
        _stages.register_stage(stage_name, owner="config")
    return ProfilerConfig(
        integrated=IntegratedConfig(**(integ or {})),
        tracer=TracerConfig(**(tracer or {})),
        system=SystemConfig(**system) if system is not None else None,
        metrics=MetricsConfig(**(metrics or {})),
        run_id=run_id,
    )
