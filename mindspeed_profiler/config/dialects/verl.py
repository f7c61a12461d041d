"""verl's profiler settings read as ours (verl 0.9.1: its keys and checks are recorded in
verl_schema.py): `global_profiler` (tool, steps, profile_continuous_steps, save_path,
global_tool_config, the finish hook) and each role's `profiler` (enable, all_ranks, ranks,
tool_config.<tool>) under actor_rollout_ref.actor / .rollout / .ref, critic, reward_model. npu /
torch / torch_memory become the `integrated` section (per-role ranks as `role_ranks`, discrete as
one capture per stage call); nsys becomes the `system` section; precision_debugger (msprobe's
tensor dumps) is not profiling: off, with a note.

What verl refuses, this refuses, at verl's key: every role block verl converts (an unknown key, a
value of the wrong type) and every tool config it instantiates (each one with a `_target_`, and
the role's own tool's), whether or not the role is enabled, as verl converts them all at start-up.
Where verl accepts a value and quietly does nothing with it (an unknown `tool`, `steps: [0]`, a
global key it never reads but that is one letter off a real one), this refuses it: docs/verl.md
lists these."""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from mindspeed_profiler.capture import stages as _stages
from mindspeed_profiler.core.capture_options import fields_of_words
from mindspeed_profiler.config.dialects.reader import STAGES_KEY, Note, Reader, Translation, is_mapping
from mindspeed_profiler.config.errors import SECTIONS, describe, hint
from mindspeed_profiler.config.dialects.verl_schema import (
    FINISH_HOOK_KEYS, VERL_GLOBAL_KEYS, VERL_GLOBAL_TOOL_KEYS, VERL_NOT_PROFILING, VERL_PROFILING_TOOLS,
    VERL_BOOL_FIELDS, VERL_RANK_FIELDS, VERL_RELEASE, VERL_ROLE_KEYS, VERL_TOOL_KEYS, VERL_TOOLS, omegaconf_bool, omegaconf_int_list, role_field_problems,
    tool_config_problems,
)

VERL_DEFAULT_SAVE_PATH = "outputs/profile"   # global_profiler.save_path in verl's ppo_trainer.yaml
# role (our role_ranks key = verl's role name) -> where its profiler block is in a trainer config
VERL_ROLE_PATHS = {
    "actor": "actor_rollout_ref.actor.profiler",
    "rollout": "actor_rollout_ref.rollout.profiler",
    "ref": "actor_rollout_ref.ref.profiler",
    "critic": "critic.profiler",
    "reward_model": "reward_model.profiler",
}
# the functions verl's workers annotate per role (DistProfiler.annotate(role=...)) -> our stage names
VERL_STAGES = {
    "actor": {"actor_update": "actor_update", "actor_compute_log_prob": "actor_compute_log_prob"},
    "rollout": {"rollout_generate": "actor_generate"},
    "ref": {"ref_compute_log_prob": "reference_compute_log_prob"},
    "critic": {"compute_values": "critic_compute_values", "critic_update": "critic_update"},
    "reward_model": {"compute_rm_score": "compute_rm_score"},
}
# tool_config.<tool>.contents -> our integrated flag (CPU activity is always on in verl 0.9: see _verl_contents)
VERL_CONTENTS = {
    "npu": {"npu": "profile_with_npu", "cpu": "profile_with_cpu", **fields_of_words("memory", "shapes", "module", "stack")},
    "torch": {"cuda": "profile_with_npu", "cpu": "profile_with_cpu", **fields_of_words("memory", "shapes", "stack")},
}
# verl < 0.9's torch contents without an equivalent; verl 0.9.1 refuses them, and so does this now
# (the name is kept: config_dialects exported it)
VERL_TORCH_UNMAPPED_CONTENTS = ("profile-by-stage", "merge-profiles")
# the settings of a tool config that become our flags (one set for all roles: the lead role's)
_MAPPED_TOOL_SETTINGS = ("contents", "level", "analysis")


def is_verl(data: Mapping[str, Any]) -> bool:
    if is_mapping(data.get("global_profiler")):
        return True
    return any(is_mapping(_plain_get(data, path)) for path in VERL_ROLE_PATHS.values())


def _plain_get(node: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        if not is_mapping(node) or part not in node:
            return None
        node = node[part]
    return node


def verl_shape(data: Mapping[str, Any]) -> str | None:
    """Where verl's settings are in `data`, decided once (load_config applies the overrides in verl's
    keys before `verl_view` reads them): "trainer" (a trainer config), "global" (a `global_profiler`
    body), "role" (one role's `profiler` body: a role config file such as verl's actor.yaml has it at
    its top), "profiler_global" / "profiler_role" (a top-level `profiler`: with steps, how verl's
    Nsight page writes global_profiler; else a role config's); None when it is not verl's."""
    keys = {k for k in data if k != "_target_"}
    if keys and not keys & set(SECTIONS):
        if keys <= set(VERL_GLOBAL_KEYS) and keys & {"tool", "profile_continuous_steps", "global_tool_config"} and \
                not keys & {"enable", "all_ranks", "ranks", "tool_config"}:
            return "global"
        if keys <= set(VERL_ROLE_KEYS) and keys & {"tool_config", "all_ranks"}:
            return "role"
        body = data.get("profiler")
        if is_mapping(body) and not is_mapping(data.get("global_profiler")):
            if "steps" in body:
                return "profiler_global"
            if set(body) <= set(VERL_ROLE_KEYS) and set(body) & {"tool_config", "all_ranks", "enable"}:
                return "profiler_role"
    return "trainer" if is_verl(data) else None


def verl_view(shape: str, data: Mapping[str, Any]) -> tuple[Mapping[str, Any], Note | None]:
    """`data` of that shape as a trainer config, with a note saying how a bare form was read."""
    if shape == "global":
        return {"global_profiler": data}, None
    if shape == "role":
        return {"actor_rollout_ref": {"actor": {"profiler": data}}}, ("(top level)", "a role's profiler block alone: read as "
                                                                                     "actor_rollout_ref.actor.profiler")
    if shape == "profiler_global":
        return {"global_profiler": data.get("profiler")}, ("profiler", "verl's trainer has no top-level profiler: read as "
                                                                       "global_profiler")
    if shape == "profiler_role":
        return {"actor_rollout_ref": {"actor": {"profiler": data.get("profiler")}}}, \
            ("profiler", "a role config's profiler: read as actor_rollout_ref.actor.profiler")
    return data, None


def from_verl(data: Mapping[str, Any], read_as: Note | None = None) -> Translation:
    """A verl trainer config (or its profiler blocks) as our block; see docs/verl.md."""
    r = Reader(data)
    if read_as is not None:
        r.note(*read_as)
    gp_where = "global_profiler"
    legacy = r.get(data, "trainer.profile_steps", "trainer.profile_steps")
    if legacy is not None:
        r.problems.append(("trainer.profile_steps", f"got {legacy!r}: verl's profiler layout before its refactor "
                                                    "(volcengine/verl#2894); write global_profiler.tool and global_profiler.steps"))
    gp = r.get(data, "global_profiler", gp_where) or {}
    r.known_keys(gp, VERL_GLOBAL_KEYS, gp_where, "verl global_profiler")
    _global_tool_keys(r, gp, gp_where)
    tool = r.get(gp, "tool", f"{gp_where}.tool")
    if tool is not None and tool not in VERL_TOOLS:
        r.problems.append((f"{gp_where}.tool", f"got {describe(tool)}; allowed: {', '.join(VERL_TOOLS)} or null"))
    steps = r.get(gp, "steps", f"{gp_where}.steps")
    if steps not in (None, []) and not r.check("integrated", "profile_steps", steps, f"{gp_where}.steps"):
        steps = [1]   # reported; the rest is still read, so that every problem is said at once
    continuous = r.flag(gp, "profile_continuous_steps", gp_where, False)
    save_path = r.get(gp, "save_path", f"{gp_where}.save_path") or VERL_DEFAULT_SAVE_PATH
    r.check("integrated", "profile_save_path", save_path, f"{gp_where}.save_path")
    _finish_hook(r, gp, gp_where)

    # each role's profiler block, checked as verl converts it; the enabled ones
    enabled: dict[str, tuple[str, Any]] = {}   # role -> (where, its profiler block)
    for role, where in VERL_ROLE_PATHS.items():
        block = r.get(data, where, where)
        if not is_mapping(block):
            continue
        _check_role_block(r, block, where, tool)
        if omegaconf_bool(r.get(block, "enable", f"{where}.enable")) is True:
            enabled[role] = (where, block)
            _finish_hook(r, block, where)
    role_tools = {role: r.get(b, "tool", f"{w}.tool") for role, (w, b) in enabled.items()}
    if tool is None:
        tool = next((t for t in role_tools.values() if t in VERL_TOOLS), None)
    if tool is None and not is_mapping(data.get("global_profiler")):   # a role's block alone: its own tool
        blocks = (r.get(data, w, w) for w in VERL_ROLE_PATHS.values())
        tool = next((t for b in blocks if is_mapping(b) for t in [r.get(b, "tool", "tool")] if t in VERL_TOOLS), None)
    for role, t in role_tools.items():
        if t is not None and t != tool:
            r.note(f"{enabled[role][0]}.tool", f"{t!r} differs from the tool used for the others ({tool!r}): one tool here for all roles")

    if tool is not None and tool not in VERL_TOOLS:
        return r.finish("verl", {})   # reported above
    off = _verl_off_reason(data, tool, steps, enabled)
    if off:
        r.note(gp_where, f"profiling off: {off}")
        return r.finish("verl", {"integrated": {"profile": False}})
    if tool == "nsys":
        return r.finish("verl", _verl_nsys(r, gp, steps, continuous, save_path, enabled))
    integ: dict[str, Any] = {"profile": True, "profile_steps": list(steps), "profile_steps_continuous": continuous,
                             "profile_save_path": save_path, "role_ranks": _verl_role_ranks(r, enabled)}
    lead_role, (lead_where, lead) = next(iter(enabled.items()))
    tc_where = f"{lead_where}.tool_config.{tool}"
    tc = _resolved(r, r.get(lead, f"tool_config.{tool}", tc_where) or {}, tc_where)
    for role, (where, block) in list(enabled.items())[1:]:
        other = _resolved(r, r.get(block, f"tool_config.{tool}", f"{where}.tool_config.{tool}") or {}, where)
        if _mapped_settings(other) != _mapped_settings(tc):
            r.note(f"{where}.tool_config.{tool}", f"differs from {tc_where}: the capture settings here are one for all "
                                                  f"roles, {lead_role}'s are used")
    if tool == "npu":
        integ.update(backend="npu", profile_export_type="db", mstx=True, mstx_domain_exclude=["communication"],
                     data_simplification=True)   # what verl's NPU profiler always sets
        level = tc.get("level", "level0")
        if level in VERL_LEVELS_OURS:
            integ["profile_level"] = level
        integ["profile_analysis"] = tc.get("analysis") is True
    elif tool == "torch":
        integ["backend"] = "torch"
        _torch_schedule(r, tc, tc_where)
    else:   # torch_memory
        integ["profile_with_memory"] = True
        r.note(f"{gp_where}.tool", "torch_memory records only the allocator history in verl; here profile_with_memory "
                                   "writes the same snapshot (memory_viz format) next to a kernel-level capture of the steps")
        _verl_memory_settings(r, gp, tc, tc_where)
    for role, (where, block) in enabled.items():
        _token_window(r, r.get(block, f"tool_config.{tool}", where) or {}, f"{where}.tool_config.{tool}", role)
    if tool in VERL_CONTENTS:
        integ.update(_verl_contents(tool, tc.get("contents", [])))
    stages, declared = _verl_discrete(r, tool, enabled, continuous)
    if stages:
        integ["stage"] = stages
        if declared:
            integ[STAGES_KEY] = declared
    return r.finish("verl", {"integrated": integ})


VERL_LEVELS_OURS = ("level_none", "level0", "level1", "level2")   # verl's levels are ours, by name


def _resolved(r: Reader, node: Any, where: str) -> dict[str, Any]:
    """A mapping's values with OmegaConf's interpolations resolved (one level: what verl's classes see)."""
    if not is_mapping(node):
        return {}
    return {str(k): r.resolve(v, f"{where}.{k}") for k, v in node.items()}


def _check_role_block(r: Reader, block: Mapping[str, Any], where: str, global_tool: Any) -> None:
    """What verl refuses in one role's profiler block (it converts every one, enabled or not). A
    block without a `tool` (written by hand: verl's own blocks interpolate global_profiler.tool)
    is read with the global tool."""
    for key in block:
        if key not in VERL_ROLE_KEYS:
            r.problems.append((f"{where}.{key}", f"not a field of verl {VERL_RELEASE}'s profiler config (verl refuses it)"
                                                 f"{hint(str(key), VERL_ROLE_KEYS)}; its fields: "
                                                 f"{', '.join(k for k in VERL_ROLE_KEYS if k != '_target_')}"))
    checked = VERL_BOOL_FIELDS + VERL_RANK_FIELDS + ("finish_hook_cmd", "tool")
    values = {k: r.resolve(v, f"{where}.{k}") for k, v in block.items() if k in checked}
    for key, what in role_field_problems(values):
        r.problems.append((f"{where}.{key}", what))
    tool = values.get("tool") or global_tool
    tool_configs = r.get(block, "tool_config", f"{where}.tool_config")
    if not is_mapping(tool_configs):
        return
    for name, raw in tool_configs.items():
        tc_where = f"{where}.tool_config.{name}"
        tc = _resolved(r, r.resolve(raw, tc_where), tc_where)
        if name not in VERL_TOOL_KEYS:
            r.note(tc_where, f"not one of verl's tools ({', '.join(VERL_TOOLS)}): ignored")
            continue
        # Hydra instantiates an entry with a _target_ (the whole block is instantiated), and the role's own tool's
        if "_target_" not in tc and name != tool:
            continue
        schedule = r.resolve(tc.get("schedule"), f"{tc_where}.schedule")
        if is_mapping(schedule):
            tc["schedule"] = _resolved(r, schedule, f"{tc_where}.schedule")
        for key, what in tool_config_problems(name, tc, is_mapping(schedule) and "_target_" in schedule):
            r.problems.append((f"{tc_where}.{key}", what))


def _global_tool_keys(r: Reader, gp: Any, where: str) -> None:
    gtc = r.get(gp, "global_tool_config", f"{where}.global_tool_config")
    if not is_mapping(gtc):
        return
    for name, block in gtc.items():
        known = VERL_GLOBAL_TOOL_KEYS.get(str(name))
        if known is None:
            r.note(f"{where}.global_tool_config.{name}", "no global settings for this tool in verl: ignored")
        else:
            r.known_keys(r.resolve(block, where), known, f"{where}.global_tool_config.{name}", f"verl {name} global_tool_config")


def _finish_hook(r: Reader, block: Any, where: str) -> None:
    """relocate_results and the finish hook: what verl does with them, and why not here (set ones only)."""
    values = {k: r.get(block, k, f"{where}.{k}") for k in FINISH_HOOK_KEYS}
    if omegaconf_bool(values["relocate_results"]) is True:
        r.note(f"{where}.relocate_results", "not needed here: every capture, the engines' included, is written in our "
                                            "layout under profile_save_path, and nsys reports under <profile_save_path>/system "
                                            "(verl moves them there from Ray's and the engines' own directories)")
    cmd = values["finish_hook_cmd"]
    if isinstance(cmd, str) and cmd.strip():
        r.note(f"{where}.finish_hook_cmd", f"not run here ({cmd[:60]!r}): run it after the job ends, on each node, over "
                                           "profile_save_path (verl runs it once after the last profiled step, with "
                                           "VERL_PROFILE_SAVE_PATH set)")
    for key in ("finish_hook_all_ranks", "finish_hook_ranks"):
        value = values[key]
        if (omegaconf_bool(value) is True if key == "finish_hook_all_ranks" else bool(omegaconf_int_list(value))) and not (
                isinstance(cmd, str) and cmd.strip()):
            r.note(f"{where}.{key}", "selects the ranks of finish_hook_cmd, which is not set: nothing to run")


def _mapped_settings(tc: Mapping[str, Any]) -> dict[str, Any]:
    return {k: tc[k] for k in _MAPPED_TOOL_SETTINGS if k in tc}


def _torch_schedule(r: Reader, tc: Mapping[str, Any], where: str) -> None:
    schedule = tc.get("schedule")
    active = schedule.get("active", 0) if is_mapping(schedule) else 0
    if isinstance(active, int) and active > 0:
        shown = ", ".join(f"{k}={schedule.get(k, 0)}" for k in ("skip_first", "wait", "warmup", "active", "repeat"))
        r.note(f"{where}.schedule", f"{shown}: verl sub-samples the update's mini-batches; not applied here: a capture "
                                    "records its iterations whole (bound its size with trace_size_budget_mb, or capture "
                                    "the update alone with stage: actor_update)")


def _token_window(r: Reader, tc: Any, where: str, role: str) -> None:
    """profile_token_start / end: verl's window of a rollout engine's capture, in engine steps."""
    start = r.get(tc, "profile_token_start", f"{where}.profile_token_start")
    end = r.get(tc, "profile_token_end", f"{where}.profile_token_end")
    if start is None and end is None:
        return
    span = f"num_steps={end - (start or 0)}" if isinstance(end, int) else "num_steps=None"
    r.note(f"{where}.profile_token_start" if start is not None else f"{where}.profile_token_end",
           f"[{start}, {end}): verl's window of the {role} engine's capture (vLLM delay_iterations / max_iterations); "
           f"here give the engine's capture its length, attach_engine(..., {span}) (docs/rollout.md); "
           + ("it starts at the stage call's first step (a later start is not supported)" if start else
              "it starts at the stage call's first step, as verl's does"))


def _verl_off_reason(data: Mapping[str, Any], tool: Any, steps: Any, enabled: Mapping[str, Any]) -> str | None:
    if tool is None:
        return ("global_profiler.tool is null (verl profiles nothing without a tool: "
                f"{', '.join(VERL_PROFILING_TOOLS)})")
    if tool == VERL_NOT_PROFILING:
        return ("global_profiler.tool is precision_debugger: msprobe's tensor dumps for precision checks, not "
                "profiling (run msprobe as verl does; nothing here reads its config)")
    if not steps:
        return f"global_profiler.steps is {steps!r} (verl profiles no step)"
    if not enabled:
        if not any(is_mapping(_plain_get(data, p)) for p in VERL_ROLE_PATHS.values()) and "defaults" in data:
            return ("no role profiler block in this file: verl composes them from its Hydra defaults (actor@..., critic@...); "
                    "pass the composed config (Hydra DictConfig, or verl's _generated_ppo_trainer.yaml)")
        return f"no role has profiler.enable: true ({', '.join(VERL_ROLE_PATHS.values())})"
    return None


def _verl_role_ranks(r: Reader, enabled: Mapping[str, tuple[str, Any]]) -> dict[str, Any]:
    """verl's all_ranks / ranks per enabled role -> our role_ranks (a role not enabled: not listed)."""
    out: dict[str, Any] = {}
    for role, (where, block) in enabled.items():
        if omegaconf_bool(r.get(block, "all_ranks", f"{where}.all_ranks")) is True:
            out[role] = "all"
            continue
        ranks = omegaconf_int_list(r.get(block, "ranks", f"{where}.ranks") or [])
        if ranks:
            if r.check("integrated", "profile_ranks", ranks, f"{where}.ranks"):
                out[role] = ranks
        elif ranks is not None:
            out[role] = [0]   # what verl's DistProfiler does with `ranks: []` and all_ranks false (its docs say "no data")
    return out


def _verl_contents(tool: str, contents: Any) -> dict[str, bool]:
    """tool_config.<tool>.contents (a list: verl's tool configs refuse anything else) -> our flags,
    as verl 0.9.1's profilers read them: CPU activity always (verl's stage markers are CPU events);
    npu: NPU activity and each extra only when listed (`[]`: CPU only); torch: CUDA activity unless
    a non-empty list leaves `cuda` out."""
    flags = VERL_CONTENTS[tool]
    listed = set(contents) if isinstance(contents, (list, tuple)) else set()
    out = {name: content in listed for content, name in flags.items()}
    out["profile_with_cpu"] = True
    if tool == "torch":
        out["profile_with_npu"] = not listed or "cuda" in listed
    return out


def _verl_discrete(r: Reader, tool: str, enabled: Mapping[str, tuple[str, Any]], continuous: bool) -> tuple[list[str], list[str]]:
    """discrete (each annotated call its own capture) -> our stage list, when every enabled role
    asks for it; returns (stages, the ones to declare)."""
    discrete = {role: omegaconf_bool(r.get(block, f"tool_config.{tool}.discrete", f"{where}.tool_config.{tool}.discrete")) is True
                for role, (where, block) in enabled.items()}
    if not any(discrete.values()):
        return [], []
    if not all(discrete.values()):
        mixed = ", ".join(f"{role}={d}" for role, d in discrete.items())
        r.note(f"{enabled[next(iter(enabled))][0]}.tool_config.{tool}.discrete",
               f"differs between roles ({mixed}): `stage` is one setting for all roles here, so every step is captured "
               "whole (stage: all); list the stages to capture per call in integrated.stage")
        return [], []
    stages = [ours for role in enabled for ours in VERL_STAGES[role].values()]
    if "actor" in enabled and "ref" not in enabled:
        r.note(f"{VERL_ROLE_PATHS['ref']}.enable", "false: in verl's colocated actor_rollout_ref worker the actor's profiler "
                                                   "also captures ref_compute_log_prob; here add reference_compute_log_prob "
                                                   "to integrated.stage and ref to role_ranks (or enable ref) to capture it")
    declared = [s for s in stages if s not in _stages.BUILTIN_STAGES]
    if continuous:
        r.note("global_profiler.profile_continuous_steps", "true with discrete: each stage call is its own capture anyway")
    return stages, declared


def _verl_memory_settings(r: Reader, gp: Any, tc: Mapping[str, Any], tc_where: str) -> None:
    defaults = {"trace_alloc_max_entries": 100_000, "stack_depth": 32, "memory_snapshot_num_steps": 1}
    settings = {k: tc[k] for k, d in defaults.items() if tc.get(k) not in (None, d)}
    where = "global_profiler.global_tool_config.torch_memory"
    gm = r.get(gp, "global_tool_config.torch_memory", where) or {}
    for key in ("context", "stacks", "kw_args"):
        if is_mapping(gm) and gm.get(key) not in (None, {}, "all"):
            settings[key] = gm[key]
    if settings:
        shown = ", ".join(f"{k}={v}" for k, v in settings.items())
        r.note(tc_where, f"{shown}: no equivalent; the allocator history here keeps the last 200000 events with full "
                         "stacks, and its snapshot is written once per capture (verl: after memory_snapshot_num_steps "
                         "profiled steps)")


def _verl_nsys(r: Reader, gp: Any, steps: Sequence[int], continuous: bool, save_path: str,
               enabled: Mapping[str, tuple[str, Any]]) -> dict[str, Any]:
    """tool: nsys -> our system section (nsight around the enabled roles' worker groups)."""
    where = "global_profiler.global_tool_config.nsys"
    nsys = r.get(gp, "global_tool_config.nsys", where) or {}
    options: dict[str, Any] = {}
    raw = r.get(nsys, "worker_nsight_options", f"{where}.worker_nsight_options") or {}
    for key, value in (raw.items() if is_mapping(raw) else ()):
        value = r.resolve(value, f"{where}.worker_nsight_options.{key}")
        if value is None or key == "_target_":
            continue   # verl's `capture-range-end: null`: left out, so ours ends each step's range (repeat:N)
        options[str(key)] = str(value).lower() if isinstance(value, bool) else value
    if r.get(nsys, "controller_nsight_options", where):
        r.note(f"{where}.controller_nsight_options", "no equivalent: the driver process is not wrapped (the tracer shows "
                                                     "its spans on the timeline)")
    discrete = any(omegaconf_bool(r.get(b, "tool_config.nsys.discrete", f"{w}.tool_config.nsys.discrete")) is True
                   for w, b in enabled.values())
    if discrete or r.flag(nsys, "discrete", where, False):
        r.note(f"{where}.discrete", "no equivalent for nsys: each listed step is one capture range (the stage NVTX "
                                    "ranges are in it)")
    ordered = sorted(steps)
    if continuous and any(b == a + 1 for a, b in zip(ordered, ordered[1:])):
        r.note("global_profiler.profile_continuous_steps", "nsys here opens one capture range per step, also for consecutive steps")
    for role, (w, block) in enabled.items():
        if omegaconf_bool(r.get(block, "all_ranks", f"{w}.all_ranks")) is not True:
            r.note(f"{w}.ranks", f"the system section wraps every worker of the {role!r} group: ranks are not applied to nsys")
    system = {"backend": "nsight", "enabled": True, "worker_groups": list(enabled), "steps": list(steps), "options": options}
    r.check("system", "options", options, f"{where}.worker_nsight_options")
    r.note(f"{where}.worker_nsight_options", f"worker_groups are verl's role names ({', '.join(enabled)}): name your "
                                             "trainer's Ray worker groups so, or edit system.worker_groups")
    return {"integrated": {"profile": False, "profile_save_path": save_path}, "system": system}
