"""verl 0.9.1's profiler settings, recorded: the keys of its config classes and shipped YAML
(verl/utils/profiler/config.py, verl/trainer/config/_generated_ppo_trainer.yaml and
profiler/profiler.yaml), and the checks verl runs on them when its trainer and workers start
(the classes' __post_init__ asserts, OmegaConf's conversion of the typed fields). Pure data and
pure functions; verl.py reads a config through them. tests/test_verl_real.py compares every list
here with the installed verl (`.venv-verl`), so verl's next release fails a test here first.

verl converts every role `profiler` block it builds a worker for with
`omega_conf_to_dataclass(block, ProfilerConfig)` (OmegaConf's typed merge: an unknown key or a
value of the wrong type is refused) and through Hydra's `instantiate` (its `_target_`), which
instantiates each `tool_config` entry that has a `_target_` with its raw values (the asserts see
them as written). `global_profiler` is never converted: verl's trainer reads it as it is.
"""
from __future__ import annotations

from typing import Any, Mapping

VERL_RELEASE = "0.9.1"
# DistProfiler's tools; precision_debugger dumps tensors for msprobe (not profiling)
VERL_TOOLS = ("npu", "nsys", "torch", "torch_memory", "precision_debugger")
VERL_PROFILING_TOOLS = ("npu", "nsys", "torch", "torch_memory")
VERL_NOT_PROFILING = "precision_debugger"
FINISH_HOOK_KEYS = ("relocate_results", "finish_hook_cmd", "finish_hook_all_ranks", "finish_hook_ranks")
# global_profiler as the shipped trainer YAML has it
VERL_GLOBAL_KEYS = ("_target_", "tool", "steps", "profile_continuous_steps", "save_path") + FINISH_HOOK_KEYS + (
    "global_tool_config",)
# a role's profiler: ProfilerConfig's fields
VERL_ROLE_KEYS = ("_target_", "tool", "enable", "all_ranks", "ranks", "save_path", "tool_config",
                  "global_tool_config") + FINISH_HOOK_KEYS
# tool_config.<tool>: each tool's config class's fields
VERL_TOOL_KEYS = {
    "npu": ("_target_", "discrete", "name", "contents", "level", "analysis", "profile_token_start", "profile_token_end"),
    "nsys": ("_target_", "discrete", "name"),
    "torch": ("_target_", "contents", "discrete", "profile_token_start", "profile_token_end", "schedule", "name"),
    "torch_memory": ("_target_", "trace_alloc_max_entries", "stack_depth", "memory_snapshot_num_steps", "name"),
    "precision_debugger": ("_target_", "name", "config_path", "steps", "stages", "strict"),
}
VERL_SCHEDULE_KEYS = ("_target_", "skip_first", "wait", "warmup", "active", "repeat", "name")   # TorchProfilerScheduleConfig
# global_profiler.global_tool_config.<tool> as the shipped YAML has it (read raw; the role blocks interpolate it)
VERL_GLOBAL_TOOL_KEYS = {
    "nsys": ("_target_", "discrete", "controller_nsight_options", "worker_nsight_options"),
    "torch_memory": ("trace_alloc_max_entries", "stack_depth", "memory_snapshot_num_steps", "context", "stacks", "kw_args"),
    "precision_debugger": ("_target_", "config_path", "steps", "stages", "strict"),
}
VERL_CONTENTS = {"npu": ("npu", "cpu", "memory", "shapes", "module", "stack"),
                 "torch": ("cuda", "cpu", "memory", "shapes", "stack")}
VERL_NPU_LEVELS = ("level_none", "level0", "level1", "level2")
VERL_BOOL_FIELDS = ("enable", "all_ranks", "relocate_results", "finish_hook_all_ranks")   # typed bool in ProfilerConfig
VERL_RANK_FIELDS = ("ranks", "finish_hook_ranks")                                         # typed list[int]
_TRUE, _FALSE = ("y", "yes", "on", "true"), ("n", "no", "off", "false")


def omegaconf_bool(value: Any) -> bool | None:
    """`value` as OmegaConf converts it for a `bool` field (verl's ProfilerConfig is typed), or
    None where OmegaConf refuses it: a bool; an int (non-zero is true); a string of an int, or
    y / yes / on / true / n / no / off / false in any case."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value != 0
    if isinstance(value, str):
        text = value.strip().lower()
        try:
            return int(text) != 0
        except ValueError:
            pass
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
    return None


def omegaconf_int_list(value: Any) -> list[int] | None:
    """`value` as OmegaConf converts it for a `list[int]` field, or None where it refuses it: a
    list or tuple of ints (not bools) or strings of ints."""
    if not isinstance(value, (list, tuple)):
        return None
    out = []
    for item in value:
        if isinstance(item, bool):
            return None
        if isinstance(item, int):
            out.append(item)
        elif isinstance(item, str):
            try:
                out.append(int(item.strip()))
            except ValueError:
                return None
        else:
            return None
    return out


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _token_window(tc: Mapping[str, Any]) -> list[tuple[str, str]]:
    """profile_token_start / profile_token_end as NPUToolConfig / TorchProfilerToolConfig check them."""
    problems = []
    for key in ("profile_token_start", "profile_token_end"):
        value = tc.get(key)
        if value is not None and not (_is_int(value) and value >= 0):
            problems.append((key, f"got {value!r}; expected null or an integer >= 0 (a response-token index)"))
    start, end = tc.get("profile_token_start"), tc.get("profile_token_end")
    if _is_int(start) and _is_int(end) and start >= 0 and end >= 0 and not end > start:
        problems.append(("profile_token_end", f"got {end!r} with profile_token_start {start!r}; it must be greater "
                                              "(the window is [start, end))"))
    return problems


def _contents(tool: str, tc: Mapping[str, Any]) -> list[tuple[str, str]]:
    allowed = VERL_CONTENTS[tool]
    contents = tc.get("contents", [])
    if not isinstance(contents, (list, tuple)):
        return [("contents", f"got {contents!r}; expected a list of: {', '.join(allowed)}")]
    return [("contents", f"unknown content {c!r}; allowed: {', '.join(allowed)}") for c in contents if c not in allowed]


def _positive_ints(tc: Mapping[str, Any], keys: tuple[str, ...], minimum: int) -> list[tuple[str, str]]:
    problems = []
    for key in keys:
        if key in tc and not (_is_int(tc[key]) and tc[key] >= minimum):
            problems.append((key, f"got {tc[key]!r}; expected an integer >= {minimum}"))
    return problems


def tool_config_problems(tool: str, tc: Mapping[str, Any], instantiated_schedule: bool) -> list[tuple[str, str]]:
    """What verl's tool config class `tool` refuses in `tc` (its values as written, as Hydra passes
    them): (key under tc, what is wrong). `instantiated_schedule`: the torch schedule has a
    `_target_` (Hydra instantiates it then, and its asserts run)."""
    problems = [(key, f"not a field of verl {VERL_RELEASE}'s {tool} tool config; its fields: "
                      f"{', '.join(k for k in VERL_TOOL_KEYS[tool] if k != '_target_')}")
                for key in tc if key not in VERL_TOOL_KEYS[tool]]
    if tool == "npu":
        problems += _contents("npu", tc)
        level = tc.get("level", "level0")
        if level not in VERL_NPU_LEVELS:
            problems.append(("level", f"got {level!r}; allowed: {', '.join(VERL_NPU_LEVELS)}"))
        if "analysis" in tc and not isinstance(tc["analysis"], bool):
            problems.append(("analysis", f"got {tc['analysis']!r}; expected true or false"))
        problems += _token_window(tc)
    elif tool == "torch":
        problems += _contents("torch", tc)
        problems += _token_window(tc)
        schedule = tc.get("schedule")
        if isinstance(schedule, Mapping) and instantiated_schedule:
            problems += [(f"schedule.{key}", f"not a field of verl's torch schedule; its fields: "
                                             f"{', '.join(k for k in VERL_SCHEDULE_KEYS if k != '_target_')}")
                         for key in schedule if key not in VERL_SCHEDULE_KEYS]
            problems += [(f"schedule.{key}", what)
                         for key, what in _positive_ints(schedule, ("skip_first", "wait", "warmup", "active", "repeat"), 0)]
    elif tool == "torch_memory":
        problems += _positive_ints(tc, ("trace_alloc_max_entries", "stack_depth", "memory_snapshot_num_steps"), 1)
    elif tool == "precision_debugger":
        if tc.get("config_path") is not None and not isinstance(tc["config_path"], str):
            problems.append(("config_path", f"got {tc['config_path']!r}; expected a path or null"))
        for key in ("steps", "stages"):
            if tc.get(key) is not None and not isinstance(tc[key], (list, tuple)):
                problems.append((key, f"got {tc[key]!r}; expected a list or null"))
        if "strict" in tc and not isinstance(tc["strict"], bool):
            problems.append(("strict", f"got {tc['strict']!r}; expected true or false"))
    return problems


def role_field_problems(block: Mapping[str, Any]) -> list[tuple[str, str]]:
    """What verl's ProfilerConfig refuses in a role's profiler block (typed merge, then its asserts):
    (key, what is wrong). Unknown keys are the caller's (it knows typos)."""
    problems = []
    for key in VERL_BOOL_FIELDS:
        if key in block and omegaconf_bool(block[key]) is None:
            problems.append((key, f"got {block[key]!r}; expected true or false (OmegaConf also reads yes / no, on / off, 1 / 0)"))
    for key in VERL_RANK_FIELDS:
        if key in block and omegaconf_int_list(block[key]) is None:
            problems.append((key, f"got {block[key]!r}; expected a list of ranks (integers), e.g. [0, 1]"))
    cmd = block.get("finish_hook_cmd")
    if cmd is not None and not isinstance(cmd, str):
        problems.append(("finish_hook_cmd", f"got {cmd!r}; expected a shell command (a string) or null"))
    return problems
