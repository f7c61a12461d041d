"""One schema for the whole `profiler_config` block: `integrated`, `tracer`, `system`.

`integrated` keeps MindSpeed-RL's 15 field names, meanings and defaults verbatim, so a MindSpeed-RL
training YAML loads unchanged; our additions are optional and their defaults keep MindSpeed's
behaviour. Everything is validated at load time (on the driver, before any worker starts) and
every problem is reported together in one `ProfilerConfigError`.

Each field is declared once, on its dataclass, with `setting(default, checker)`; the section
schemas (`INTEGRATED_FIELDS`, ...) are derived from the dataclasses.
"""
from __future__ import annotations

import difflib
import re
import math
import os
from dataclasses import dataclass, field, fields
from pathlib import Path
from types import MappingProxyType
from typing import Any, Callable, Iterable, Mapping, Sequence

from mindspeed_profiler import stages as _stages
from mindspeed_profiler import yaml_bounded
from mindspeed_profiler.formats import ROLE_RE, RUN_ID_KEY, RUN_ID_RE, SYSTEM_DIR

ROOT_KEY = "profiler_config"
MISSING = "???"  # OmegaConf's mandatory-missing marker
SECTIONS = ("integrated", "tracer", "system")

PROFILE_LEVELS = ("level_none", "level0", "level1", "level2")
EXPORT_TYPES = ("text", "db")
TRACER_SINKS = ("file", "collector")
# torch_npu.profiler.AiCMetrics members, by their config spelling.
AIC_METRICS = (
    "PipeUtilization",
    "ArithmeticUtilization",
    "Memory",
    "MemoryL0",
    "MemoryUB",
    "ResourceConflictRatio",
    "L2Cache",
    "MemoryAccess",
    "AiCoreNone",
)
PARALLEL_DIMS = ("tp", "pp", "dp", "cp", "ep")
DEFAULT_SAVE_PATH = "./profiler_data"
# The largest iteration number a config may name: a 32-bit count (2**31 - 1 iterations of one
# second each is 68 years), what the analysis's tables hold. Windows are never expanded into lists.
MAX_ITERATION = 2**31 - 1
NAME_MAX = 255     # bytes in one path component (Linux file systems)
PATH_MAX = 4096    # bytes in a whole path
MAX_OVERRIDE_DEPTH = 16  # dotted parts in one override key (the schema is three levels deep)
MAX_UNKNOWN_REPORTED = 10  # unknown keys of one section listed (with a hint each); the rest are counted
MAX_YAML_NODES = 200_000  # a config file's nodes with every YAML alias expanded (a "billion laughs" is refused)

# Process-level capture of Ray worker groups is built (mindspeed_profiler/system/): an enabled
# `system` section wraps the listed groups. (Before it was, `enabled: true` was refused at load.)
SYSTEM_CAPTURE_AVAILABLE = True


def backend_choices() -> tuple[str, ...]:
    """The allowed values of `integrated.backend`: `auto` and every registered capture backend,
    asked at check time (a backend registered by the user counts)."""
    from mindspeed_profiler.backends.registry import AUTO, backend_names  # lazy: backends import this module

    return (AUTO,) + backend_names()


def system_backend_choices() -> tuple[str, ...]:
    """The allowed values of `system.backend`: every registered system backend (system/backends/:
    nsight, rocprof_sys, msprof, py_spy, and what the user registers), asked at check time."""
    from mindspeed_profiler.system.backends import system_backend_names  # lazy: the registry imports its modules

    return system_backend_names()


class ProfilerConfigError(ValueError):
    """Every problem found in a profiler_config, reported together.

    `problems` is a list of (path, message) pairs; str() lists them one per line.
    """

    def __init__(self, problems: Sequence[tuple[str, str]]):
        self.problems = list(problems)
        lines = [f"{len(self.problems)} problem(s) in {ROOT_KEY}:"] if len(self.problems) > 1 else []
        lines += [f"{path}: {msg}" for path, msg in self.problems]
        super().__init__("\n".join(lines))


# --------------------------------------------------------------------------------------------
# Field checkers: each takes (value, path, problems) and returns the normalized value
# --------------------------------------------------------------------------------------------

Problems = list  # list[tuple[str, str]]
Checker = Callable[[Any, str, Problems], Any]
_BAD = object()  # marks a value that failed its check


def _describe(value: Any) -> str:
    return f"{value!r} ({type(value).__name__})"


def _bool(value: Any, path: str, problems: Problems) -> Any:
    if isinstance(value, bool):
        return value
    problems.append((path, f"got {_describe(value)}; expected true or false"))
    return _BAD


def _int(minimum: int | None = None, maximum: int | None = None) -> Checker:
    def check(value: Any, path: str, problems: Problems) -> Any:
        allowed = (f" >= {minimum}" if minimum is not None else "") + (f" and <= {maximum}" if maximum is not None else "")
        if isinstance(value, bool) or not isinstance(value, int):
            problems.append((path, f"got {_describe(value)}; expected an integer{allowed}"))
            return _BAD
        if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
            shown = value if abs(value) < 10**30 else f"an integer of {len(str(abs(value)))} digits"
            problems.append((path, f"got {shown}; expected an integer{allowed}"))
            return _BAD
        return value

    return check


def _number(minimum_exclusive: float | None = None, optional: bool = False, *, minimum: float | None = None,
            maximum: float | None = None) -> Checker:
    def check(value: Any, path: str, problems: Problems) -> Any:
        if value is None and optional:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            problems.append((path, f"got {_describe(value)}; expected a finite number" + (" or null" if optional else "")))
            return _BAD
        if minimum_exclusive is not None and not value > minimum_exclusive:
            problems.append((path, f"got {value}; expected a number > {minimum_exclusive}"))
            return _BAD
        if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
            problems.append((path, f"got {value}; expected a number from {minimum} to {maximum}"))
            return _BAD
        return float(value)

    return check


def _choice(choices: Sequence[str] | Callable[[], Sequence[str]], optional: bool = False, case_insensitive: bool = True) -> Checker:
    """`choices`: the allowed values, or a function returning them at check time (e.g. backend_choices)."""

    def check(value: Any, path: str, problems: Problems) -> Any:
        if value is None and optional:
            return None
        allowed = choices() if callable(choices) else choices
        if isinstance(value, str):
            if value in allowed:
                return value
            if case_insensitive:
                folded = {a.lower(): a for a in allowed}
                if value.lower() in folded:
                    return folded[value.lower()]
        problems.append((path, f"got {_describe(value)}; allowed: {', '.join(allowed)}" + (" or null" if optional else "") + _hint(value, allowed)))
        return _BAD

    return check


def _str(optional: bool = False) -> Checker:
    def check(value: Any, path: str, problems: Problems) -> Any:
        if value is None and optional:
            return None
        if isinstance(value, str) and value.strip():
            return value
        problems.append((path, f"got {_describe(value)}; expected a non-empty string" + (" or null" if optional else "")))
        return _BAD

    return check


def _str_list(optional: bool = False) -> Checker:
    def check(value: Any, path: str, problems: Problems) -> Any:
        if value is None and optional:
            return None
        if isinstance(value, (list, tuple)) and all(isinstance(v, str) and v for v in value):
            bad = [v for v in value if "\0" in v]
            if bad:   # these become command-line words: exec refuses a NUL, and the worker would not start
                problems.append((path, f"{bad[0][:60]!r} contains a NUL byte; a command-line word cannot hold one"))
                return _BAD
            return tuple(value)
        problems.append((path, f"got {_describe(value)}; expected a list of strings" + (" or null" if optional else "")))
        return _BAD

    return check


def _step_list(optional: bool = True) -> Checker:
    def check(value: Any, path: str, problems: Problems) -> Any:
        if value is None and optional:
            return None
        if isinstance(value, (list, tuple)) and value and all(isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= MAX_ITERATION for v in value):
            if len(set(value)) != len(value):
                problems.append((path, f"got {list(value)}; steps must not repeat"))
                return _BAD
            return tuple(sorted(value))
        shown = _describe(value) if len(repr(value)) < 200 else f"a {type(value).__name__} of {len(value) if hasattr(value, '__len__') else '?'} items"
        problems.append((path, f"got {shown}; expected a non-empty list of integers >= 1 and <= {MAX_ITERATION} (1-based iterations)"
                               + (" or null" if optional else "")))
        return _BAD

    return check


def _scalar_map(value: Any, path: str, problems: Problems) -> Any:
    """A mapping of str -> scalar (rendered as command-line values / env vars)."""
    if value is None:
        return MappingProxyType({})
    if not isinstance(value, Mapping):
        problems.append((path, f"got {_describe(value)}; expected a mapping of name: value"))
        return _BAD
    out: dict[str, str] = {}
    ok = True
    for k, v in value.items():
        if not isinstance(k, str) or not k:
            problems.append((f"{path}.{k}", f"key {k!r} must be a non-empty string"))
            ok = False
        elif isinstance(v, bool) or not isinstance(v, (str, int, float)):
            problems.append((f"{path}.{k}", f"got {_describe(v)}; expected a string or number"))
            ok = False
        elif "\0" in k or "\0" in str(v):   # a command-line word or an environment entry: exec refuses a NUL
            problems.append((f"{path}.{k[:60]}", "contains a NUL byte; a command-line word or environment value cannot hold one"))
            ok = False
        else:
            out[k] = str(v)
    return MappingProxyType(out) if ok else _BAD


ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _env_map(value: Any, path: str, problems: Problems) -> Any:
    """_scalar_map whose keys are environment variable names (no '=', which exec would read as the
    end of the name, and no NUL)."""
    out = _scalar_map(value, path, problems)
    if out is _BAD:
        return _BAD
    bad = [k for k in out if not ENV_NAME_RE.match(k)]
    for k in bad:
        problems.append((f"{path}.{k[:60]}", f"{k[:60]!r} is not an environment variable name (letters, digits and '_', "
                                             "not starting with a digit)"))
    return _BAD if bad else out


ALL_GROUPS = "all"


def _worker_groups(value: Any, path: str, problems: Problems) -> Any:
    """null (no group), `all`, or a list of group names as the trainer names them (`all` in a list
    means all)."""
    if value is None:
        return None
    if isinstance(value, str) and value.lower() == ALL_GROUPS:
        return ALL_GROUPS
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) and v.strip() for v in value):
        if any(v.lower() == ALL_GROUPS for v in value):
            return ALL_GROUPS
        if len(set(value)) != len(value):
            problems.append((path, f"got {list(value)}; group names must not repeat"))
            return _BAD
        return tuple(value)
    extra = f" (write a list, even for one group: [{value}])" if isinstance(value, str) and "," not in value else \
        " (a string such as \"a,b\" is not a list: write [a, b])" if isinstance(value, str) else ""
    problems.append((path, f"got {_describe(value)}; allowed: all, null (no group), or a list of worker group names "
                           f"such as [actor, reference]{extra}"))
    return _BAD


def _stage(value: Any, path: str, problems: Problems) -> Any:
    valid = _stages.registered_stages()
    allowed = f"allowed: all, or one or a list of: {', '.join(valid)} (trainers add more with register_stage)"
    if isinstance(value, str) and value.lower() == _stages.ALL:
        return _stages.ALL
    if isinstance(value, str):
        if _stages.is_stage(value):
            return value
        problems.append((path, f"unknown stage {value!r}; {allowed}{_hint(value, valid)}"))
        return _BAD
    if isinstance(value, (list, tuple)) and value:
        bad = [v for v in value if not _stages.is_stage(v)]
        if not bad:
            if len(set(value)) != len(value):
                problems.append((path, f"got {list(value)}; stage names must not repeat"))
                return _BAD
            return tuple(value)
        for v in bad:
            if isinstance(v, str) and v.lower() == _stages.ALL:
                problems.append((path, "'all' cannot be combined with other stages in a list; write stage: all"))
            else:
                problems.append((path, f"unknown stage {v!r} in list; {allowed}{_hint(v, valid)}"))
        return _BAD
    problems.append((path, f"got {_describe(value)}; {allowed}"))
    return _BAD


def _ranks(value: Any, path: str, problems: Problems) -> Any:
    if isinstance(value, str) and value.lower() == "all":
        return "all"
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value):
        return tuple(sorted(set(value)))
    extra = ""
    if isinstance(value, str):
        extra = " (a string such as \"0,1\" is not a list: write [0, 1])"
    problems.append((path, f"got {_describe(value)}; allowed: 'all', a rank number >= 0, or a non-empty list of rank numbers such as [0, 1]{extra}"))
    return _BAD


def _role_ranks(value: Any, path: str, problems: Problems) -> Any:
    """null (no per-role selection) or {role: ranks}, each ranks as in profile_ranks."""
    if value is None:
        return None
    if not isinstance(value, Mapping) or not value:
        problems.append((path, f"got {_describe(value)}; expected a mapping of role name to ranks such as "
                               "{actor: [0, 1], rollout: [0], ref: all}, or null (every role)"))
        return _BAD
    out: dict[str, Any] = {}
    for role, ranks in value.items():
        if not isinstance(role, str) or not ROLE_RE.match(role):
            problems.append((f"{path}.{role}", f"role name {role!r} is not allowed: use letters, digits, '_', '.', '-' "
                                               "(the role a profiler is built with, e.g. IntegratedProfiler(cfg, role='actor'))"))
            continue
        checked = _ranks(ranks, f"{path}.{role}", problems)
        if checked is not _BAD:
            out[role] = checked
    return MappingProxyType(out) if len(out) == len(value) else _BAD


def _rank_in(ranks: str | int | tuple[int, ...], rank: int) -> bool:
    """Whether a normalized ranks value ('all', an int, a tuple) selects `rank`."""
    if ranks == "all":
        return True
    return rank == ranks if isinstance(ranks, int) else rank in ranks


def _declared_stages(value: Any, path: str, problems: Problems) -> Any:
    """Stage names this trainer adds: registered here (validation) and in every worker (runtime)."""
    if value is None:
        return ()
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, (list, tuple)):
        problems.append((path, f"got {_describe(value)}; expected a list of stage names such as [actor_image_embeds]"))
        return _BAD
    ok = True
    for name in names:
        try:
            _stages.register_stage(name, owner="config")
        except ValueError as exc:
            problems.append((path, str(exc)))
            ok = False
    return tuple(dict.fromkeys(names)) if ok else _BAD


def _parallel_ranks(value: Any, path: str, problems: Problems) -> Any:
    if value is None:
        return None
    if not isinstance(value, Mapping) or not value:
        problems.append((path, f"got {_describe(value)}; expected a mapping such as {{tp: [0], pp: [0]}} with keys from {', '.join(PARALLEL_DIMS)}"))
        return _BAD
    out: dict[str, tuple[int, ...]] = {}
    ok = True
    for k, v in value.items():
        if k not in PARALLEL_DIMS:
            problems.append((f"{path}.{k}", f"unknown parallel dimension {k!r}; allowed: {', '.join(PARALLEL_DIMS)}{_hint(k, PARALLEL_DIMS)}"))
            ok = False
            continue
        items = [v] if isinstance(v, int) and not isinstance(v, bool) else v
        if isinstance(items, (list, tuple)) and items and all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in items):
            out[k] = tuple(sorted(set(items)))
        else:
            problems.append((f"{path}.{k}", f"got {_describe(v)}; expected a rank number >= 0 or a list of them"))
            ok = False
    return MappingProxyType(out) if ok else _BAD


def _path_problem(text: str) -> str | None:
    """Why `text` cannot name a directory on this machine, or None (nothing is touched)."""
    if "\0" in text:
        return "contains a NUL byte"
    try:
        raw = os.fsencode(text)
    except UnicodeError:
        return "cannot be encoded for the file system"
    if len(raw) > PATH_MAX:
        return f"is {len(raw)} bytes long; paths hold at most {PATH_MAX}"
    long = next((c for c in raw.split(b"/") if len(c) > NAME_MAX), None)
    if long is not None:
        return f"has a component of {len(long)} bytes ({long[:24].decode(errors='replace')}...); a file name holds at most {NAME_MAX}"
    return None


def _expand(text: str, path: str, problems: Problems) -> Any:
    """`~` / `~user` expanded (the runtime writes where the check looked), or _BAD."""
    try:
        expanded = os.path.expanduser(text)
    except (RuntimeError, KeyError, OSError) as exc:
        problems.append((path, f"got {text!r}: cannot expand the home directory ({exc})"))
        return _BAD
    if text.startswith("~") and expanded == text:
        problems.append((path, f"got {text!r}: no such user to expand {text.split('/', 1)[0]!r}"))
        return _BAD
    why = _path_problem(expanded)
    if why:
        problems.append((path, f"got {expanded[:80]!r}{'...' if len(expanded) > 80 else ''}: the path {why}"))
        return _BAD
    return expanded


def _save_path(value: Any, path: str, problems: Problems) -> Any:
    if value is None or (isinstance(value, str) and not value.strip()):
        # MindSpeed-RL's own class default is "" (its docs say ./profiler_data): keep such YAMLs loading
        return DEFAULT_SAVE_PATH
    if not isinstance(value, (str, os.PathLike)) or isinstance(os.fspath(value), bytes):
        problems.append((path, f"got {_describe(value)}; expected a directory path"))
        return _BAD
    return _expand(os.fspath(value), path, problems)


def _dir_path(value: Any, path: str, problems: Problems) -> Any:
    """An optional output directory (null: the default under profile_save_path)."""
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        problems.append((path, f"got {_describe(value)}; expected a directory path or null"))
        return _BAD
    return _expand(value, path, problems)


def _hint(value: Any, candidates: Iterable[str]) -> str:
    if not isinstance(value, str):
        return ""
    close = difflib.get_close_matches(value, list(candidates), n=1, cutoff=0.5)
    return f" (did you mean {close[0]!r}?)" if close else ""


# --------------------------------------------------------------------------------------------
# Typed, immutable config objects: each field declared once, with its default and its checker
# --------------------------------------------------------------------------------------------

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
    profile: bool = setting(False, _bool, mindspeed=True)
    mstx: bool = setting(False, _bool, mindspeed=True)
    stage: str | tuple[str, ...] = setting("all", _stage, mindspeed=True)  # the stage registry is read at check time
    profile_save_path: str = setting(DEFAULT_SAVE_PATH, _save_path, mindspeed=True)
    profile_export_type: str = setting("text", _choice(EXPORT_TYPES), mindspeed=True)
    profile_step_start: int = setting(1, _int(1, MAX_ITERATION), mindspeed=True)
    profile_step_end: int = setting(2, _int(1, MAX_ITERATION + 1), mindspeed=True)
    profile_level: str = setting("level0", _choice(PROFILE_LEVELS), mindspeed=True)
    profile_with_memory: bool = setting(False, _bool, mindspeed=True)
    profile_record_shapes: bool = setting(False, _bool, mindspeed=True)
    profile_with_cpu: bool = setting(True, _bool, mindspeed=True)
    profile_with_npu: bool = setting(True, _bool, mindspeed=True)
    profile_with_module: bool = setting(False, _bool, mindspeed=True)
    profile_analysis: bool = setting(False, _bool, mindspeed=True)
    profile_ranks: str | int | tuple[int, ...] = setting("all", _ranks, mindspeed=True)
    # --- our additions (defaults keep MindSpeed behaviour) ---
    backend: str = setting("auto", _choice(backend_choices))
    profile_steps: tuple[int, ...] | None = setting(None, _step_list())
    warmup_steps: int = setting(0, _int(0))
    trace_size_budget_mb: float | None = setting(None, _number(0.0, optional=True))
    profile_with_stack: bool = setting(False, _bool)
    profile_with_flops: bool = setting(False, _bool)
    aic_metrics: str | None = setting(None, _choice(AIC_METRICS, optional=True))
    l2_cache: bool = setting(False, _bool)
    data_simplification: bool = setting(True, _bool)
    mstx_domain_include: tuple[str, ...] = setting((), _str_list())
    mstx_domain_exclude: tuple[str, ...] = setting((), _str_list())
    profile_parallel_ranks: Mapping[str, tuple[int, ...]] | None = setting(None, _parallel_ranks)
    # listen for on-demand capture requests (mindspeed-profiler trigger; ondemand/), also with profile: false
    dynamic: bool = setting(False, _bool)
    # per-role rank selection (verl's per-role profiler.enable / all_ranks / ranks): a role not listed captures nothing
    role_ranks: Mapping[str, str | int | tuple[int, ...]] | None = setting(None, _role_ranks)
    # false: each recorded step is its own capture (verl's profile_continuous_steps: false)
    profile_steps_continuous: bool = setting(True, _bool)
    # the trainer's own stage names (e.g. MindSpeed-RL's actor_image_embeds), so `stage` may select them
    register_stages: tuple[str, ...] = setting((), _declared_stages)

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
            from mindspeed_profiler.schedule import runs

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
            if role not in self.role_ranks or not _rank_in(self.role_ranks[role], rank):
                return False
        return _rank_in(self.profile_ranks, rank)

    def stage_selected(self, stage: str) -> bool:
        selected = self.stages
        return selected is None or stage in selected


@dataclass(frozen=True)
class TracerConfig:
    """`profiler_config.tracer`: the cross-worker timeline (RLinf's cluster.tracer, done better)."""

    enable: bool = setting(False, _bool)
    output_dir: str | None = setting(None, _dir_path)  # default: <profile_save_path>/timeline
    flush_every_events: int = setting(4096, _int(1))
    # the flusher thread sleeps this long between flushes: too short spins a core, too long never flushes
    flush_interval_s: float = setting(2.0, _number(minimum=0.01, maximum=3600.0))
    buffer_max_events: int = setting(1_000_000, _int(1))
    sink: str = setting("file", _choice(TRACER_SINKS))
    clock_sync: bool = setting(True, _bool)
    clock_sync_rounds: int = setting(8, _int(1))
    gzip: bool = setting(False, _bool)


@dataclass(frozen=True)
class SystemConfig:
    """`profiler_config.system`: process-level capture of Ray worker groups (RLinf's
    cluster.profiling): nsys, rocprof-sys, msprof or py-spy wraps each listed group's worker
    processes (mindspeed_profiler/system/, docs/system-profiling.md)."""

    backend: str = setting("nsight", _choice(system_backend_choices))
    enabled: bool = setting(True, _bool)
    worker_groups: str | tuple[str, ...] | None = setting(None, _worker_groups)  # "all", names, or None
    steps: tuple[int, ...] | None = setting(None, _step_list())
    output_dir: str | None = setting(None, _dir_path)  # default: <profile_save_path>/system
    options: Mapping[str, str] = setting({}, _scalar_map)
    flags: tuple[str, ...] = setting((), _str_list())
    args: Mapping[str, str] = setting({}, _scalar_map)
    env: Mapping[str, str] = setting({}, _env_map)


@dataclass(frozen=True)
class ProfilerConfig:
    """The whole validated `profiler_config` block."""

    integrated: IntegratedConfig = field(default_factory=IntegratedConfig)
    tracer: TracerConfig = field(default_factory=TracerConfig)
    system: SystemConfig | None = None
    # Not a setting: the id of the run this config drives, set by manifest.start_run on the driver
    # and carried to the workers with the config (`profiler_config.run_id`).
    run_id: str | None = None

    @property
    def timeline_dir(self) -> str:
        return self.tracer.output_dir or os.path.join(self.integrated.profile_save_path, "timeline")

    @property
    def system_output_dir(self) -> str:
        default = os.path.join(self.integrated.profile_save_path, SYSTEM_DIR)
        return (self.system.output_dir if self.system else None) or default

    def to_dict(self) -> dict[str, Any]:
        """Plain, YAML-friendly dict (lists for tuples) of the normalized config."""
        block = {name: _plain(getattr(self, name)) for name in SECTIONS if getattr(self, name) is not None}
        if self.run_id is not None:
            block[RUN_ID_KEY] = self.run_id
        return {ROOT_KEY: block}

    def to_yaml(self) -> str:
        import yaml

        return yaml.safe_dump(self.to_dict(), sort_keys=False)


def _plain(value: Any) -> Any:
    if hasattr(value, "__dataclass_fields__"):
        return {f.name: _plain(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    return value


# --------------------------------------------------------------------------------------------
# Section schemas (field name -> checker), derived from the dataclasses; read-only
# --------------------------------------------------------------------------------------------


def _schema(cls: type) -> Mapping[str, Checker]:
    missing = [f.name for f in fields(cls) if _CHECK not in f.metadata]
    if missing:
        raise TypeError(f"{cls.__name__} fields without a checker: {', '.join(missing)}; declare them with setting()")
    return MappingProxyType({f.name: f.metadata[_CHECK] for f in fields(cls)})


INTEGRATED_FIELDS = _schema(IntegratedConfig)
TRACER_FIELDS = _schema(TracerConfig)
SYSTEM_FIELDS = _schema(SystemConfig)
# MindSpeed-RL's 15 `integrated` fields, in its order
MINDSPEED_FIELDS = tuple(f.name for f in fields(IntegratedConfig) if f.metadata[_MINDSPEED])

_SECTION_SCHEMAS: Mapping[str, Mapping[str, Checker]] = MappingProxyType(
    {"integrated": INTEGRATED_FIELDS, "tracer": TRACER_FIELDS, "system": SYSTEM_FIELDS}
)


def _field_keys(raw: Mapping[str, Any], schema: Mapping[str, Checker], path: str, problems: Problems) -> dict[str, Any]:
    """The section's keys as fields: `profile-ranks` is `profile_ranks` (MindSpeed-RL's loader reads
    '-' as '_'; a field given both ways is a problem), and `register_stages` comes first so that
    `stage` may name what it declares."""
    out: dict[Any, Any] = {}
    written: dict[Any, Any] = {}
    for key, value in raw.items():
        name = key.replace("-", "_") if isinstance(key, str) and key not in schema and key.replace("-", "_") in schema else key
        if name in out:
            problems.append((f"{path}.{name}", f"is given twice, as {written[name]!r} and {key!r} ('-' reads as '_'); keep one"))
            continue
        out[name], written[name] = value, key
    first = {k: out.pop(k) for k in ("register_stages",) if k in out}
    return {**first, **out}


def _check_section(name: str, raw: Any, problems: Problems) -> dict[str, Any] | None:
    """Type-check one section; returns its normalized fields (bad ones omitted) or None."""
    path = f"{ROOT_KEY}.{name}"
    schema = _SECTION_SCHEMAS[name]
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        problems.append((path, f"got {_describe(raw)}; expected a mapping of fields"))
        return None
    raw = _field_keys(raw, schema, path, problems)
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
            home = next((s for s, sch in _SECTION_SCHEMAS.items() if s != name and key in sch), None)
            also = f"; {key!r} is a field of {ROOT_KEY}.{home}" if home else ""
            hint = _hint(key, schema) if len(text) <= 100 else ""
            problems.append((where, f"unknown key {shown!r}{hint}{also}; valid keys: {', '.join(schema)}"))
            continue
        if value == MISSING:
            problems.append((f"{path}.{key}", f"is {MISSING!r}, OmegaConf/Hydra's missing value: set it in the YAML or with an override"))
            continue
        checked = schema[key](value, f"{path}.{key}", problems)
        if checked is not _BAD:
            out[key] = checked
    if unknown > MAX_UNKNOWN_REPORTED:
        problems.append((path, f"{unknown - MAX_UNKNOWN_REPORTED} more unknown key(s) not listed ({unknown} in all)"))
    return out


# --------------------------------------------------------------------------------------------
# Cross-field rules
# --------------------------------------------------------------------------------------------


def _check_integrated(f: dict[str, Any], had_bad: bool, problems: Problems, check_paths: bool) -> None:
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
        msg = _unwritable(f["profile_save_path"])
        if msg:
            problems.append((f"{p}.profile_save_path", msg))


def _unwritable(path: str) -> str | None:
    """Why `path` cannot be used as an output directory, or None. Creates nothing."""
    try:
        target = Path(path).expanduser()
        target.exists()
    except (OSError, RuntimeError, ValueError) as exc:
        return f"got {path[:80]!r}: cannot be used as a path ({type(exc).__name__}: {exc})"
    if target.exists():
        if not target.is_dir():
            return f"got {path!r}: it exists and is a file, not a directory"
        if not os.access(target, os.W_OK | os.X_OK):
            return f"got {path!r}: the directory is not writable by this user"
        return None
    parent = target.absolute().parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        return f"got {path!r}: {str(parent)!r} exists and is a file, so the directory cannot be created"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"got {path!r}: cannot create it, {str(parent)!r} is not writable by this user"
    return None


# How messages name a backend's settings field.
_FIELD_NOUN = {"options": "options", "flags": "flags", "args": "arguments"}


def _system_backend(name: Any) -> Any:
    """The registered system backend of that name, or None (a bad name is reported by its checker)."""
    from mindspeed_profiler.system.backends import system_backend

    try:
        return system_backend(name) if isinstance(name, str) else None
    except ValueError:
        return None


def _wrong_field(field_name: str, backend: Any) -> str:
    """`options are nsys profile options (backend: nsight) or ...; for rocprof_sys use args`."""
    from mindspeed_profiler.system.backends import system_backend

    noun = _FIELD_NOUN[field_name]
    owners = [system_backend(n) for n in system_backend_choices()]
    owners = [b for b in owners if field_name in b.fields]
    whose = " or ".join(f"{b.title} {noun} (backend: {b.name})" for b in owners) or "read by no backend"
    takes = " and ".join(backend.fields)
    return f"{field_name} are {whose}; for {backend.name} use {takes}"


def _check_system(f: dict[str, Any], raw: Mapping[str, Any], problems: Problems, check_paths: bool, profile_save_path: str) -> None:
    p = f"{ROOT_KEY}.system"
    enabled = f.get("enabled", True)
    if "backend" not in raw and enabled:
        problems.append((f"{p}.backend", f"is required when the system section is enabled; allowed: {', '.join(system_backend_choices())}"))
    backend = _system_backend(f.get("backend"))
    options = f.get("options") or {}
    flags = f.get("flags") or ()
    args = f.get("args") or {}
    if backend is not None:
        for name, value in (("options", options), ("flags", flags), ("args", args)):
            if value and name not in backend.fields:
                problems.append((f"{p}.{name}", _wrong_field(name, backend)))
    for key in list(options) + list(args):
        if key.startswith("-"):
            section = "options" if key in options else "args"
            problems.append((f"{p}.{section}.{key}", f"write the key without dashes ({key.lstrip('-')!r}): one-letter keys render as -k value, longer ones as --key=value"))
    for flag in flags:
        name = flag.lstrip("-")
        if flag.startswith("-"):
            problems.append((f"{p}.flags", f"write flag {flag!r} without dashes ({name!r}); it renders as --{name}"))
        if name in options or name in args:
            problems.append((f"{p}.flags", f"{name!r} is given both as a flag and as an option; keep one"))
        if "=" in name:
            problems.append((f"{p}.flags", f"flag {flag!r} carries a value; put it in options as {name.split('=')[0]}: {name.split('=', 1)[1]}"))
    if backend is not None and backend.key_field:
        for key in sorted(backend.reserved & set(options if backend.key_field == "options" else args)):
            problems.append((f"{p}.{backend.key_field}.{key}", f"is set by mindspeed-profiler for {backend.name} (the report "
                             f"goes to <output_dir>/<group>_rank<R>, the worker's own command is run): remove it"))
    steps = f.get("steps")
    if backend is not None and steps:
        if backend.steps_mode is None:
            problems.append((f"{p}.steps", f"got {list(steps)}; the {backend.name} backend cannot be limited to training "
                             f"steps: {backend.no_steps}; remove steps to capture each wrapped worker's whole process"))
        else:
            problems += [(f"{p}.{sub}", msg) for sub, msg in backend.step_problems(options, steps)]
    if check_paths and enabled and (f.get("output_dir") or f.get("worker_groups")):
        out = f.get("output_dir") or os.path.join(profile_save_path, SYSTEM_DIR)
        msg = _unwritable(out)
        if msg:
            problems.append((f"{p}.output_dir", msg))


# --------------------------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------------------------


def _to_container(source: Any) -> Any:
    """Turn an OmegaConf/Hydra DictConfig (or ListConfig) into plain Python, without importing omegaconf.

    Of a whole training config only the `profiler_config` node is resolved: an interpolation or a
    Hydra resolver elsewhere (e.g. `${now:...}` outside a Hydra app) is none of our business. An
    interpolation inside the block still resolves against the whole config. `???` (missing) values
    are kept as the string '???' so that an override can fill them; validation names any left.
    """
    mod = type(source).__module__
    if not mod.startswith("omegaconf"):
        return source
    from omegaconf import DictConfig, OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    try:
        if isinstance(source, DictConfig) and ROOT_KEY in source:
            node = OmegaConf.select(source, ROOT_KEY, throw_on_missing=False)  # resolves `profiler_config: ${x}`
            if OmegaConf.is_config(node):
                node = OmegaConf.to_container(node, resolve=True)
            return {ROOT_KEY: MISSING if OmegaConf.is_missing(source, ROOT_KEY) else node}
        return OmegaConf.to_container(source, resolve=True)
    except OmegaConfBaseException as exc:
        where = getattr(exc, "full_key", None) or ROOT_KEY
        msg = str(getattr(exc, "msg", None) or exc).strip().splitlines()[0]
        raise ProfilerConfigError([(where, f"cannot resolve: {msg}")]) from None


def _load_yaml(path: Path) -> Any:
    """safe_load with a bound on alias expansion (a 279-byte "billion laughs" file expands to
    millions of nodes: refused before anything is built from it)."""
    where = str(path)
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ProfilerConfigError([(where, f"not UTF-8 text (byte {exc.start}: {exc.reason}); save the YAML as UTF-8")]) from None
    except OSError as exc:
        raise ProfilerConfigError([(where, f"cannot read: {exc.strerror or exc}")]) from None
    try:
        return yaml_bounded.load(text, max_nodes=MAX_YAML_NODES)
    except yaml_bounded.YamlRefused as exc:
        raise ProfilerConfigError([(where, str(exc))]) from None
    except RecursionError:
        raise ProfilerConfigError([(where, "nested too deeply to be a config")]) from None


def _read_source(source: Any) -> tuple[Any, str]:
    if isinstance(source, (bytes, bytearray)) or (isinstance(source, os.PathLike) and isinstance(os.fspath(source), bytes)):
        raise ProfilerConfigError([(repr(source)[:200], "expected a path as text (str), not bytes")])
    if isinstance(source, (str, os.PathLike)):
        where = os.fspath(source)
        shown = where if len(where) <= 200 else where[:200] + "..."
        why = _path_problem(where)
        if why:
            raise ProfilerConfigError([(shown, f"not a usable config file path: it {why}")])
        if where.startswith("~") and os.path.expanduser(where) == where:
            raise ProfilerConfigError([(shown, f"no such user to expand {where.split('/', 1)[0]!r}")])
        try:
            path = Path(where).expanduser()
            exists, is_dir = path.exists(), path.is_dir()
        except (OSError, RuntimeError, ValueError) as exc:
            raise ProfilerConfigError([(shown, f"not a usable config file path ({type(exc).__name__}: {exc})")]) from None
        if not exists:
            raise ProfilerConfigError([(shown, "config file not found")])
        if is_dir:
            raise ProfilerConfigError([(shown, "is a directory; expected a YAML file")])
        return _load_yaml(path), str(path)
    return _to_container(source), "<dict>"


def _find_block(data: Any, origin: str) -> dict[str, Any]:
    """Locate the profiler_config block in a whole training YAML, the block itself, or a bare section."""
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise ProfilerConfigError([(origin, f"got {_describe(data)} at the top level; expected a mapping")])
    from mindspeed_profiler.config_dialects import find_block  # verl / RLinf / MindSpeed-RL spellings, notes reported

    translated = find_block(data)
    if translated is not None:
        return translated
    if ROOT_KEY in data:
        block = _to_container(data[ROOT_KEY])
        if block is None:
            return {}
        if not isinstance(block, Mapping):
            raise ProfilerConfigError([(ROOT_KEY, f"got {_describe(block)}; expected a mapping with integrated / tracer / system")])
        return dict(block)
    keys = set(data)
    if keys & set(SECTIONS):
        return dict(data)  # the block itself; validate() reports any unknown section
    if keys and (keys <= set(INTEGRATED_FIELDS) or any(str(k).startswith("profile") for k in keys & set(INTEGRATED_FIELDS))):
        return {"integrated": dict(data)}  # a bare `integrated` section; validate() reports unknown keys
    # A typo must not silently turn profiling off: a top-level key close to `profiler_config`, or a
    # mapping whose every key is close to a section or integrated field name, is checked as such.
    str_keys = [k for k in data if isinstance(k, str)]
    for k in str_keys:
        if difflib.get_close_matches(k, [ROOT_KEY], n=1, cutoff=0.8):
            raise ProfilerConfigError([(k, f"unknown top-level key {k!r} (did you mean {ROOT_KEY!r}?); "
                                           f"without a {ROOT_KEY} block profiling stays off")])
    if str_keys and len(str_keys) == len(keys):
        if all(difflib.get_close_matches(k, list(SECTIONS), n=1, cutoff=0.8) for k in str_keys):
            return dict(data)
        if all(difflib.get_close_matches(k, list(SECTIONS) + list(INTEGRATED_FIELDS), n=1, cutoff=0.8) for k in str_keys):
            return {"integrated": dict(data)}
    # a training YAML with no profiler_config: profiling stays off (MindSpeed's default)
    return {}


def _parse_override(text: str) -> tuple[list[str], Any]:
    if "=" not in text:
        raise ProfilerConfigError([(_shown(text), "override must look like profiler_config.integrated.stage=actor_update")])
    key, raw_value = text.split("=", 1)
    key = key.strip().lstrip("+")  # Hydra's '+key=value' adds a key; same for us
    parts = [p for p in key.split(".") if p]
    if parts and parts[0] == ROOT_KEY:
        parts = parts[1:]
    if not parts:
        raise ProfilerConfigError([(_shown(text), "override has no key")])
    if len(parts) > MAX_OVERRIDE_DEPTH:
        raise ProfilerConfigError([(text[:120] + ("..." if len(text) > 120 else ""),
                                    f"override key has {len(parts)} dotted parts; the config is 3 levels deep "
                                    f"(e.g. profiler_config.integrated.stage=actor_update)")])
    try:
        value = yaml_bounded.load_value(raw_value)
    except yaml_bounded.YamlRefused as exc:
        raise ProfilerConfigError([(_shown(text), f"value: {exc}")]) from None
    return parts, value


def _shown(text: str, n: int = 120) -> str:
    """An override as shown in an error: its first characters (a value may be megabytes)."""
    return text if len(text) <= n else text[:n] + "..."


def _apply_override(block: dict[str, Any], parts: list[str], value: Any) -> None:
    node = block
    for part in parts[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = dict(child) if isinstance(child, Mapping) else {}
            node[part] = child
        node = child
    node[parts[-1]] = value


def _deep_copy(obj: Any) -> Any:
    if isinstance(obj, Mapping):
        return {k: _deep_copy(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_deep_copy(v) for v in obj]
    return obj


def validate(block: Mapping[str, Any], *, check_paths: bool = True) -> ProfilerConfig:
    """Validate a `profiler_config` mapping (with integrated / tracer / system keys)."""
    problems: list[tuple[str, str]] = []
    if not isinstance(block, Mapping):
        raise ProfilerConfigError([(ROOT_KEY, f"got {_describe(block)}; expected a mapping")])
    for key in block:
        if key not in SECTIONS and key != RUN_ID_KEY:
            problems.append((f"{ROOT_KEY}.{key}", f"unknown section {key!r}{_hint(key, SECTIONS)}; valid sections: {', '.join(SECTIONS)}"))
    run_id = block.get(RUN_ID_KEY)
    if run_id is not None and not (isinstance(run_id, str) and RUN_ID_RE.match(run_id)):
        problems.append((f"{ROOT_KEY}.{RUN_ID_KEY}", f"got {_describe(run_id)}; expected up to 64 letters, digits, '.', '_' "
                                                     "or '-' (it is set by start_run on the driver; leave it out)"))
    n_before = len(problems)
    integ = _check_section("integrated", block.get("integrated"), problems)
    integ_bad = len(problems) > n_before
    tracer = _check_section("tracer", block.get("tracer"), problems)
    system_raw = block.get("system")
    system = _check_section("system", system_raw, problems) if system_raw is not None else None
    if integ is not None:
        _check_integrated(integ, integ_bad, problems, check_paths)
    save_path = (integ or {}).get("profile_save_path", DEFAULT_SAVE_PATH)
    if tracer and tracer.get("enable") and check_paths:
        out = tracer.get("output_dir") or os.path.join(save_path, "timeline")
        msg = _unwritable(out)
        if msg:
            problems.append((f"{ROOT_KEY}.tracer.output_dir", msg))
    if system is not None and isinstance(system_raw, Mapping):
        _check_system(system, system_raw, problems, check_paths, save_path)
    if problems:
        raise ProfilerConfigError(problems)
    return ProfilerConfig(
        integrated=IntegratedConfig(**(integ or {})),
        tracer=TracerConfig(**(tracer or {})),
        system=SystemConfig(**system) if system is not None else None,
        run_id=run_id,
    )


def load_config(source: Any = None, overrides: Iterable[str] = (), *, check_paths: bool = True) -> ProfilerConfig:
    """Load and validate a profiler config.

    `source`: a YAML path, a dict, an OmegaConf/Hydra DictConfig, or None (all defaults); either a
    whole training YAML (the `profiler_config` key is found) or the block itself.
    `overrides`: dotted `key=value` strings, e.g. `profiler_config.integrated.stage=actor_update`
    (the `profiler_config.` prefix is optional; values are parsed as YAML).
    Returns typed, immutable objects; raises ProfilerConfigError listing every problem, and nothing
    else whatever the input (docs/reliability.md).
    """
    try:
        return _load(source, overrides, check_paths)
    except RecursionError:
        raise ProfilerConfigError([(ROOT_KEY, "nested too deeply to be a config (a value inside thousands of lists or mappings)")]) from None


def _load(source: Any, overrides: Any, check_paths: bool) -> ProfilerConfig:
    if isinstance(source, ProfilerConfig):
        block: dict[str, Any] = source.to_dict()[ROOT_KEY]
    else:
        data, origin = _read_source(source)
        block = _deep_copy(_find_block(data, origin))
    if overrides is None:
        overrides = ()
    if isinstance(overrides, str):
        overrides = [overrides]
    if isinstance(overrides, (bytes, bytearray)) or not isinstance(overrides, Iterable):
        raise ProfilerConfigError([("overrides", f"got {_describe(overrides)}; expected a list of strings such as "
                                                 f"['profiler_config.integrated.stage=actor_update']")])
    errors: list[tuple[str, str]] = []
    for text in overrides:
        if not isinstance(text, str):
            errors.append(("overrides", f"got {_describe(text)} in the list; each override is a string key=value"))
            continue
        try:
            parts, value = _parse_override(text)
        except ProfilerConfigError as exc:
            errors.extend(exc.problems)
            continue
        _apply_override(block, parts, value)
    if errors:
        raise ProfilerConfigError(errors)
    return validate(block, check_paths=check_paths)
