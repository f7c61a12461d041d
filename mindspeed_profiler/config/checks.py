"""The field checkers: each takes (value, path, problems), appends what is wrong to `problems`
(where, message: naming the value and what is allowed) and returns the normalized value or BAD."""
from __future__ import annotations

import math
import os
import re
from types import MappingProxyType
from typing import Any, Callable, Mapping, Sequence

from mindspeed_profiler.capture import stages as _stages
from mindspeed_profiler.core import yaml_bounded
from mindspeed_profiler.backends.registry import AUTO, backend_names
from mindspeed_profiler.config.errors import BAD, Checker, Problems, describe, hint
from mindspeed_profiler.core.fileio import unwritable  # noqa: F401 - validate and the system rules name it here too
from mindspeed_profiler.core.formats import ROLE_RE
from mindspeed_profiler.system.backends import system_backend_names

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
MAX_YAML_NODES = yaml_bounded.MAX_NODES  # a config file's nodes with every YAML alias expanded (a "billion laughs" is refused)


def backend_choices() -> tuple[str, ...]:
    """The allowed values of `integrated.backend`: `auto` and every registered capture backend,
    asked at check time (a backend registered by the user counts)."""
    return (AUTO,) + backend_names()


def system_backend_choices() -> tuple[str, ...]:
    """The allowed values of `system.backend`: every registered system backend (system/backends/:
    nsight, rocprof_sys, msprof, py_spy, and what the user registers), asked at check time."""
    return system_backend_names()


def check_bool(value: Any, path: str, problems: Problems) -> Any:
    if isinstance(value, bool):
        return value
    problems.append((path, f"got {describe(value)}; expected true or false"))
    return BAD


def check_int(minimum: int | None = None, maximum: int | None = None, optional: bool = False) -> Checker:
    def check(value: Any, path: str, problems: Problems) -> Any:
        if value is None and optional:
            return None
        allowed = (f" >= {minimum}" if minimum is not None else "") + (f" and <= {maximum}" if maximum is not None else "") \
            + (" or null" if optional else "")
        if isinstance(value, bool) or not isinstance(value, int):
            problems.append((path, f"got {describe(value)}; expected an integer{allowed}"))
            return BAD
        if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
            shown = value if abs(value) < 10**30 else f"an integer of {len(str(abs(value)))} digits"
            problems.append((path, f"got {shown}; expected an integer{allowed}"))
            return BAD
        return value

    return check


def check_number(minimum_exclusive: float | None = None, optional: bool = False, *, minimum: float | None = None,
            maximum: float | None = None) -> Checker:
    def check(value: Any, path: str, problems: Problems) -> Any:
        if value is None and optional:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            problems.append((path, f"got {describe(value)}; expected a finite number" + (" or null" if optional else "")))
            return BAD
        if minimum_exclusive is not None and not value > minimum_exclusive:
            problems.append((path, f"got {value}; expected a number > {minimum_exclusive}"))
            return BAD
        if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
            problems.append((path, f"got {value}; expected a number from {minimum} to {maximum}"))
            return BAD
        return float(value)

    return check


def check_choice(choices: Sequence[str] | Callable[[], Sequence[str]], optional: bool = False, case_insensitive: bool = True) -> Checker:
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
        problems.append((path, f"got {describe(value)}; allowed: {', '.join(allowed)}" + (" or null" if optional else "") + hint(value, allowed)))
        return BAD

    return check


def check_str(optional: bool = False) -> Checker:
    def check(value: Any, path: str, problems: Problems) -> Any:
        if value is None and optional:
            return None
        if isinstance(value, str) and value.strip():
            return value
        problems.append((path, f"got {describe(value)}; expected a non-empty string" + (" or null" if optional else "")))
        return BAD

    return check


def check_str_list(optional: bool = False) -> Checker:
    def check(value: Any, path: str, problems: Problems) -> Any:
        if value is None and optional:
            return None
        if isinstance(value, (list, tuple)) and all(isinstance(v, str) and v for v in value):
            bad = [v for v in value if "\0" in v]
            if bad:   # these become command-line words: exec refuses a NUL, and the worker would not start
                problems.append((path, f"{bad[0][:60]!r} contains a NUL byte; a command-line word cannot hold one"))
                return BAD
            return tuple(value)
        problems.append((path, f"got {describe(value)}; expected a list of strings" + (" or null" if optional else "")))
        return BAD

    return check


def check_step_list(optional: bool = True) -> Checker:
    def check(value: Any, path: str, problems: Problems) -> Any:
        if value is None and optional:
            return None
        if isinstance(value, (list, tuple)) and value and all(isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= MAX_ITERATION for v in value):
            if len(set(value)) != len(value):
                problems.append((path, f"got {list(value)}; steps must not repeat"))
                return BAD
            return tuple(sorted(value))
        shown = describe(value) if len(repr(value)) < 200 else f"a {type(value).__name__} of {len(value) if hasattr(value, '__len__') else '?'} items"
        problems.append((path, f"got {shown}; expected a non-empty list of integers >= 1 and <= {MAX_ITERATION} (1-based iterations)"
                               + (" or null" if optional else "")))
        return BAD

    return check


def check_scalar_map(value: Any, path: str, problems: Problems) -> Any:
    """A mapping of str -> scalar (rendered as command-line values / env vars)."""
    if value is None:
        return MappingProxyType({})
    if not isinstance(value, Mapping):
        problems.append((path, f"got {describe(value)}; expected a mapping of name: value"))
        return BAD
    out: dict[str, str] = {}
    ok = True
    for k, v in value.items():
        if not isinstance(k, str) or not k:
            problems.append((f"{path}.{k}", f"key {k!r} must be a non-empty string"))
            ok = False
        elif isinstance(v, bool) or not isinstance(v, (str, int, float)):
            problems.append((f"{path}.{k}", f"got {describe(v)}; expected a string or number"))
            ok = False
        elif "\0" in k or "\0" in str(v):   # a command-line word or an environment entry: exec refuses a NUL
            problems.append((f"{path}.{k[:60]}", "contains a NUL byte; a command-line word or environment value cannot hold one"))
            ok = False
        else:
            out[k] = str(v)
    return MappingProxyType(out) if ok else BAD


ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def check_env_map(value: Any, path: str, problems: Problems) -> Any:
    """check_scalar_map whose keys are environment variable names (no '=', which exec would read as the
    end of the name, and no NUL)."""
    out = check_scalar_map(value, path, problems)
    if out is BAD:
        return BAD
    bad = [k for k in out if not ENV_NAME_RE.match(k)]
    for k in bad:
        problems.append((f"{path}.{k[:60]}", f"{k[:60]!r} is not an environment variable name (letters, digits and '_', "
                                             "not starting with a digit)"))
    return BAD if bad else out


ALL_GROUPS = "all"


def check_worker_groups(value: Any, path: str, problems: Problems) -> Any:
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
            return BAD
        return tuple(value)
    extra = f" (write a list, even for one group: [{value}])" if isinstance(value, str) and "," not in value else \
        " (a string such as \"a,b\" is not a list: write [a, b])" if isinstance(value, str) else ""
    problems.append((path, f"got {describe(value)}; allowed: all, null (no group), or a list of worker group names "
                           f"such as [actor, reference]{extra}"))
    return BAD


def check_stage(value: Any, path: str, problems: Problems, declared: Sequence[str] = ()) -> Any:
    """`all`, a registered stage name or a list of them; `declared`: the names the config itself
    declares (register_stages), which count though they are not registered yet."""
    valid = _stages.registered_stages() + tuple(n for n in declared if not _stages.is_stage(n))

    def known(v: Any) -> bool:
        return _stages.is_stage(v) or (isinstance(v, str) and v in declared)

    allowed = f"allowed: all, or one or a list of: {', '.join(valid)} (trainers add more with register_stage)"
    if isinstance(value, str) and value.lower() == _stages.ALL:
        return _stages.ALL
    if isinstance(value, str):
        if known(value):
            return value
        problems.append((path, f"unknown stage {value!r}; {allowed}{hint(value, valid)}"))
        return BAD
    if isinstance(value, (list, tuple)) and value:
        bad = [v for v in value if not known(v)]
        if not bad:
            if len(set(value)) != len(value):
                problems.append((path, f"got {list(value)}; stage names must not repeat"))
                return BAD
            return tuple(value)
        for v in bad:
            if isinstance(v, str) and v.lower() == _stages.ALL:
                problems.append((path, "'all' cannot be combined with other stages in a list; write stage: all"))
            else:
                problems.append((path, f"unknown stage {v!r} in list; {allowed}{hint(v, valid)}"))
        return BAD
    problems.append((path, f"got {describe(value)}; {allowed}"))
    return BAD


def check_ranks(value: Any, path: str, problems: Problems) -> Any:
    if isinstance(value, str) and value.lower() == "all":
        return "all"
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value):
        return tuple(sorted(set(value)))
    extra = ""
    if isinstance(value, str):
        extra = " (a string such as \"0,1\" is not a list: write [0, 1])"
    problems.append((path, f"got {describe(value)}; allowed: 'all', a rank number >= 0, or a non-empty list of rank numbers such as [0, 1]{extra}"))
    return BAD


def check_role_ranks(value: Any, path: str, problems: Problems) -> Any:
    """null (no per-role selection) or {role: ranks}, each ranks as in profile_ranks."""
    if value is None:
        return None
    if not isinstance(value, Mapping) or not value:
        problems.append((path, f"got {describe(value)}; expected a mapping of role name to ranks such as "
                               "{actor: [0, 1], rollout: [0], ref: all}, or null (every role)"))
        return BAD
    out: dict[str, Any] = {}
    for role, ranks in value.items():
        if not isinstance(role, str) or not ROLE_RE.match(role):
            problems.append((f"{path}.{role}", f"role name {role!r} is not allowed: use letters, digits, '_', '.', '-' "
                                               "(the role a profiler is built with, e.g. IntegratedProfiler(cfg, role='actor'))"))
            continue
        checked = check_ranks(ranks, f"{path}.{role}", problems)
        if checked is not BAD:
            out[role] = checked
    return MappingProxyType(out) if len(out) == len(value) else BAD


def rank_in(ranks: str | int | tuple[int, ...], rank: int) -> bool:
    """Whether a normalized ranks value ('all', an int, a tuple) selects `rank`."""
    if ranks == "all":
        return True
    return rank == ranks if isinstance(ranks, int) else rank in ranks


def check_declared_stages(value: Any, path: str, problems: Problems) -> Any:
    """Stage names this trainer adds: checked here, registered once the whole config is accepted
    (validate) and in every worker (the profiler, at runtime)."""
    if value is None:
        return ()
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, (list, tuple)):
        problems.append((path, f"got {describe(value)}; expected a list of stage names such as [actor_image_embeds]"))
        return BAD
    ok = True
    for name in names:
        try:
            _stages.check_stage_name(name)
        except ValueError as exc:
            problems.append((path, str(exc)))
            ok = False
    return tuple(dict.fromkeys(names)) if ok else BAD


def check_parallel_ranks(value: Any, path: str, problems: Problems) -> Any:
    if value is None:
        return None
    if not isinstance(value, Mapping) or not value:
        problems.append((path, f"got {describe(value)}; expected a mapping such as {{tp: [0], pp: [0]}} with keys from {', '.join(PARALLEL_DIMS)}"))
        return BAD
    out: dict[str, tuple[int, ...]] = {}
    ok = True
    for k, v in value.items():
        if k not in PARALLEL_DIMS:
            problems.append((f"{path}.{k}", f"unknown parallel dimension {k!r}; allowed: {', '.join(PARALLEL_DIMS)}{hint(k, PARALLEL_DIMS)}"))
            ok = False
            continue
        items = [v] if isinstance(v, int) and not isinstance(v, bool) else v
        if isinstance(items, (list, tuple)) and items and all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in items):
            out[k] = tuple(sorted(set(items)))
        else:
            problems.append((f"{path}.{k}", f"got {describe(v)}; expected a rank number >= 0 or a list of them"))
            ok = False
    return MappingProxyType(out) if ok else BAD


def path_problem(text: str) -> str | None:
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


def expand_path(text: str, path: str, problems: Problems) -> Any:
    """`~` / `~user` expanded (the runtime writes where the check looked), or BAD."""
    try:
        expanded = os.path.expanduser(text)
    except (RuntimeError, KeyError, OSError) as exc:
        problems.append((path, f"got {text!r}: cannot expand the home directory ({exc})"))
        return BAD
    if text.startswith("~") and expanded == text:
        problems.append((path, f"got {text!r}: no such user to expand {text.split('/', 1)[0]!r}"))
        return BAD
    why = path_problem(expanded)
    if why:
        problems.append((path, f"got {expanded[:80]!r}{'...' if len(expanded) > 80 else ''}: the path {why}"))
        return BAD
    return expanded


def check_save_path(value: Any, path: str, problems: Problems) -> Any:
    if value is None or (isinstance(value, str) and not value.strip()):
        # MindSpeed-RL's own class default is "" (its docs say ./profiler_data): keep such YAMLs loading
        return DEFAULT_SAVE_PATH
    if not isinstance(value, (str, os.PathLike)) or isinstance(os.fspath(value), bytes):
        problems.append((path, f"got {describe(value)}; expected a directory path"))
        return BAD
    return expand_path(os.fspath(value), path, problems)


def check_dir_path(value: Any, path: str, problems: Problems) -> Any:
    """An optional output directory (null: the default under profile_save_path)."""
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        problems.append((path, f"got {describe(value)}; expected a directory path or null"))
        return BAD
    return expand_path(value, path, problems)


# `integrated.auto_capture` (ondemand/auto_capture.py, docs/ondemand.md "Automatic capture of the slow
# iteration"): the keys of its mapping with their defaults and checkers. `iterations` and
# `lead_iterations` stay within an on-demand request's 1,000 iterations (ondemand/requests.py).
AUTO_CAPTURE_KEYS: Mapping[str, tuple[Any, Checker]] = MappingProxyType({
    "enable": (True, check_bool),
    "factor": (3.0, check_number(1.0)),                              # > 1: slower than the running median by this
    "stage": (None, None),                                           # null: the whole iteration; else one stage (below)
    "iterations": (2, check_int(1, 1000)),                           # N iterations captured after the slow one
    "max_captures": (2, check_int(1, 1000)),                         # M automatic captures per run, per worker
    "min_history": (10, check_int(1, 100_000)),                      # iterations timed before it may fire
    "window": (100, check_int(1, 100_000)),                          # iterations in the running median
    "lead_iterations": (0, check_int(0, 1000)),                      # iterations between the slow one and the capture
    "min_time_s": (0.0, check_number(minimum=0.0, maximum=86400.0)),  # a slow time below this never fires
})


def check_auto_stage(value: Any, path: str, problems: Problems, declared: Sequence[str] = ()) -> Any:
    """null (the whole iteration) or one registered stage name (or one the config declares: `declared`)."""
    if value is None:
        return None
    valid = _stages.registered_stages() + tuple(n for n in declared if not _stages.is_stage(n))
    if isinstance(value, str) and (_stages.is_stage(value) or value in declared):
        return value
    problems.append((path, f"got {describe(value)}; allowed: null (the whole iteration) or one stage of: "
                           f"{', '.join(valid)} (trainers add more with register_stage){hint(value, valid)}"))
    return BAD


def check_auto_capture(value: Any, path: str, problems: Problems, declared: Sequence[str] = ()) -> Any:
    """false / null (off), true (every default) or a mapping of AUTO_CAPTURE_KEYS -> the normalized
    mapping with every key, or None when off. `declared`: the config's register_stages, which its
    `stage` may name (validate.py passes them, as for `integrated.stage`)."""
    if value is None or value is False:
        return None
    if value is True:
        value = {}
    if not isinstance(value, Mapping):
        problems.append((path, f"got {describe(value)}; expected true, false or a mapping with keys from "
                               f"{', '.join(AUTO_CAPTURE_KEYS)}"))
        return BAD
    out: dict[str, Any] = {k: default for k, (default, _) in AUTO_CAPTURE_KEYS.items()}
    ok = True
    unknown = [k for k in value if k not in AUTO_CAPTURE_KEYS]
    for key in unknown[:MAX_UNKNOWN_REPORTED]:   # thousands of keys: the first ones say enough
        text = str(key)[:80]
        problems.append((f"{path}.{text}", f"unknown key {text!r}{hint(text, AUTO_CAPTURE_KEYS)}; valid keys: "
                                           f"{', '.join(AUTO_CAPTURE_KEYS)}"))
    if len(unknown) > MAX_UNKNOWN_REPORTED:
        problems.append((path, f"{len(unknown) - MAX_UNKNOWN_REPORTED} more unknown key(s) not listed"))
    for key, raw in value.items():
        where = f"{path}.{key}"
        if key not in AUTO_CAPTURE_KEYS:
            ok = False
            continue
        check = AUTO_CAPTURE_KEYS[key][1]
        got = check(raw, where, problems) if check is not None else check_auto_stage(raw, where, problems, declared)
        if got is BAD:
            ok = False
        else:
            out[key] = got
    if ok and out["min_history"] > out["window"]:
        problems.append((f"{path}.min_history", f"got {out['min_history']} with window {out['window']}; the running "
                                                "median holds at most `window` iterations: need min_history <= window"))
        ok = False
    if not ok:
        return BAD
    return MappingProxyType(out) if out.pop("enable") else None
