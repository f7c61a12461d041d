"""verl's profiler settings read as ours: `global_profiler` (tool, steps, profile_continuous_steps,
save_path, global_tool_config) and each role's `profiler` (enable, all_ranks, ranks,
tool_config.<tool>) under actor_rollout_ref.actor / .rollout / .ref, critic, reward_model. npu /
torch / torch_memory become the `integrated` section (per-role ranks as `role_ranks`, discrete as
one capture per stage call); nsys becomes the `system` section."""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from mindspeed_profiler.capture import stages as _stages
from mindspeed_profiler.core.capture_options import fields_of_words
from mindspeed_profiler.config.dialects.reader import ABSENT, STAGES_KEY, Note, Reader, Translation, is_mapping
from mindspeed_profiler.config.errors import SECTIONS, describe, hint

VERL_TOOLS = ("npu", "nsys", "torch", "torch_memory")
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
VERL_GLOBAL_KEYS = ("_target_", "tool", "steps", "profile_continuous_steps", "save_path", "global_tool_config")
VERL_ROLE_KEYS = ("_target_", "tool", "enable", "all_ranks", "ranks", "save_path", "tool_config", "global_tool_config")
VERL_TOOL_KEYS = {
    "npu": ("_target_", "name", "contents", "level", "analysis", "discrete"),
    "torch": ("_target_", "name", "contents", "discrete", "step_start", "step_end"),
    "nsys": ("_target_", "name", "discrete"),
    "torch_memory": ("_target_", "name", "trace_alloc_max_entries", "stack_depth"),
}
# tool_config.<tool>.contents -> our integrated flag
VERL_CONTENTS = {
    "npu": {"npu": "profile_with_npu", "cpu": "profile_with_cpu", **fields_of_words("memory", "shapes", "module", "stack")},
    "torch": {"cuda": "profile_with_npu", "cpu": "profile_with_cpu", **fields_of_words("memory", "shapes", "stack")},
}
VERL_TORCH_UNMAPPED_CONTENTS = ("profile-by-stage", "merge-profiles")


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
    """A verl trainer config (or its profiler blocks) as our block; see docs/migrating.md."""
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
    tool = r.get(gp, "tool", f"{gp_where}.tool")
    if tool is not None and tool not in VERL_TOOLS:
        r.problems.append((f"{gp_where}.tool", f"got {describe(tool)}; allowed: {', '.join(VERL_TOOLS)} or null"))
    steps = r.get(gp, "steps", f"{gp_where}.steps")
    if steps not in (None, []) and not r.check("integrated", "profile_steps", steps, f"{gp_where}.steps"):
        steps = [1]   # reported; the rest is still read, so that every problem is said at once
    continuous = r.flag(gp, "profile_continuous_steps", gp_where, False)
    save_path = r.get(gp, "save_path", f"{gp_where}.save_path") or VERL_DEFAULT_SAVE_PATH
    r.check("integrated", "profile_save_path", save_path, f"{gp_where}.save_path")

    # each role's profiler block: enabled roles, their tool and its tool_config
    enabled: dict[str, tuple[str, Any]] = {}   # role -> (where, its profiler block)
    for role, where in VERL_ROLE_PATHS.items():
        block = r.get(data, where, where)
        if not is_mapping(block):
            continue
        r.known_keys(block, VERL_ROLE_KEYS, where, "verl role profiler")
        if r.flag(block, "enable", where, False):
            enabled[role] = (where, block)
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
    tc = r.get(lead, f"tool_config.{tool}", tc_where) or {}
    r.known_keys(tc, VERL_TOOL_KEYS[tool], tc_where, f"verl {tool} tool_config")
    for role, (where, block) in list(enabled.items())[1:]:
        other = r.get(block, f"tool_config.{tool}", f"{where}.tool_config.{tool}") or {}
        if _tool_settings(other) != _tool_settings(tc):
            r.note(f"{where}.tool_config.{tool}", f"differs from {tc_where}: the capture settings here are one for all "
                                                  f"roles, {lead_role}'s are used")
    if tool == "npu":
        integ.update(backend="npu", profile_export_type="db", mstx=True, mstx_domain_exclude=["communication"],
                     data_simplification=True)   # what verl's NPU profiler always sets
        level = r.get(tc, "level", f"{tc_where}.level", "level0")
        if r.check("integrated", "profile_level", level, f"{tc_where}.level"):
            integ["profile_level"] = level
        analysis = r.flag(tc, "analysis", tc_where, False)
        integ["profile_analysis"] = analysis
    elif tool == "torch":
        integ["backend"] = "torch"
        for key in ("step_start", "step_end"):
            if r.get(tc, key, f"{tc_where}.{key}") not in (None, 0, -1):
                r.note(f"{tc_where}.{key}", "not used by verl's torch profiler either (global_profiler.steps decides): ignored")
    else:   # torch_memory
        integ["profile_with_memory"] = True
        r.note(f"{gp_where}.tool", "torch_memory records only the allocator history in verl; here profile_with_memory "
                                   "writes the same snapshot (memory_viz format) next to a kernel-level capture of the steps")
        _verl_memory_settings(r, gp, tc, tc_where)
    if tool in VERL_CONTENTS:
        contents = r.get(tc, "contents", f"{tc_where}.contents") if is_mapping(tc) and "contents" in tc else ABSENT
        integ.update(_verl_contents(r, tool, contents, f"{tc_where}.contents"))
    stages, declared = _verl_discrete(r, tool, enabled, continuous)
    if stages:
        integ["stage"] = stages
        if declared:
            integ[STAGES_KEY] = declared
    return r.finish("verl", {"integrated": integ})


def _verl_off_reason(data: Mapping[str, Any], tool: Any, steps: Any, enabled: Mapping[str, Any]) -> str | None:
    if tool is None:
        return "global_profiler.tool is null (verl profiles nothing without a tool: npu, nsys, torch or torch_memory)"
    if not steps:
        return f"global_profiler.steps is {steps!r} (verl profiles no step)"
    if not enabled:
        if not any(is_mapping(_plain_get(data, p)) for p in VERL_ROLE_PATHS.values()) and "defaults" in data:
            return ("no role profiler block in this file: verl composes them from its Hydra defaults (actor@..., critic@...); "
                    "pass the composed config (Hydra DictConfig, or verl's _generated_ppo_trainer.yaml)")
        return f"no role has profiler.enable: true ({', '.join(VERL_ROLE_PATHS.values())})"
    return None


def _tool_settings(tc: Any) -> dict[str, Any]:
    return {k: v for k, v in tc.items() if k not in ("_target_", "name")} if is_mapping(tc) else {}


def _verl_role_ranks(r: Reader, enabled: Mapping[str, tuple[str, Any]]) -> dict[str, Any]:
    """verl's all_ranks / ranks per enabled role -> our role_ranks (a role not enabled: not listed)."""
    out: dict[str, Any] = {}
    for role, (where, block) in enabled.items():
        if r.flag(block, "all_ranks", where, False):
            out[role] = "all"
            continue
        ranks = r.get(block, "ranks", f"{where}.ranks")
        if ranks:
            if r.check("integrated", "profile_ranks", ranks, f"{where}.ranks"):
                out[role] = list(ranks) if isinstance(ranks, (list, tuple)) else ranks
        else:
            out[role] = [0]
            r.note(f"{where}.ranks", "empty with all_ranks false: verl then profiles rank 0 (DistProfiler's default); "
                                     "role_ranks lists [0]")
    return out


def _verl_contents(r: Reader, tool: str, contents: Any, where: str) -> dict[str, bool]:
    """tool_config.<tool>.contents -> our flags. Absent or [] : host and device activity only (verl's
    documented default); null: everything (verl's NPU profiler reads None as all)."""
    flags = VERL_CONTENTS[tool]
    allowed = tuple(flags) + (VERL_TORCH_UNMAPPED_CONTENTS if tool == "torch" else ())
    if contents is None:
        return {name: True for name in flags.values()}
    if contents is ABSENT or contents == []:
        return {}
    if not isinstance(contents, (list, tuple)) or not all(isinstance(c, str) for c in contents):
        r.problems.append((where, f"got {describe(contents)}; expected a list of: {', '.join(allowed)}"))
        return {}
    bad = [c for c in contents if c not in allowed]
    for c in bad:
        r.problems.append((where, f"unknown content {c!r}; allowed: {', '.join(allowed)}{hint(c, allowed)}"))
    for c in contents:
        if c in VERL_TORCH_UNMAPPED_CONTENTS:
            r.note(where, f"{c!r} has no equivalent here: ignored (stage captures come from `stage`, see docs/migrating.md)")
    return {name: content in contents for content, name in flags.items()}


def _verl_discrete(r: Reader, tool: str, enabled: Mapping[str, tuple[str, Any]], continuous: bool) -> tuple[list[str], list[str]]:
    """discrete (each annotated call its own capture) -> our stage list, when every enabled role
    asks for it; returns (stages, the ones to declare)."""
    discrete = {role: r.flag(r.get(block, f"tool_config.{tool}", where), "discrete", f"{where}.tool_config.{tool}", False)
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


def _verl_memory_settings(r: Reader, gp: Any, tc: Any, tc_where: str) -> None:
    settings = {}
    for key in ("trace_alloc_max_entries", "stack_depth"):
        value = r.get(tc, key, f"{tc_where}.{key}")
        if value is not None:
            settings[key] = value
    where = "global_profiler.global_tool_config.torch_memory"
    gm = r.get(gp, "global_tool_config.torch_memory", where) or {}
    for key in ("context", "stacks", "kw_args"):
        if is_mapping(gm) and gm.get(key) not in (None, {}, "all"):
            settings[key] = gm[key]
    if settings:
        shown = ", ".join(f"{k}={v}" for k, v in settings.items())
        r.note(tc_where, f"{shown}: no equivalent; the allocator history here keeps the last "
                         f"200000 events with full stacks")


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
    discrete = any(r.flag(r.get(b, "tool_config.nsys", w), "discrete", f"{w}.tool_config.nsys", False) for w, b in enabled.values())
    if discrete or r.flag(nsys, "discrete", where, False):
        r.note(f"{where}.discrete", "no equivalent for nsys: each listed step is one capture range (the stage NVTX "
                                    "ranges are in it)")
    ordered = sorted(steps)
    if continuous and any(b == a + 1 for a, b in zip(ordered, ordered[1:])):
        r.note("global_profiler.profile_continuous_steps", "nsys here opens one capture range per step, also for consecutive steps")
    for role, (w, block) in enabled.items():
        if not r.flag(block, "all_ranks", w, False):
            r.note(f"{w}.ranks", f"the system section wraps every worker of the {role!r} group: ranks are not applied to nsys")
    system = {"backend": "nsight", "enabled": True, "worker_groups": list(enabled), "steps": list(steps), "options": options}
    r.check("system", "options", options, f"{where}.worker_nsight_options")
    r.note(f"{where}.worker_nsight_options", f"worker_groups are verl's role names ({', '.join(enabled)}): name your "
                                             "trainer's Ray worker groups so, or edit system.worker_groups")
    return {"integrated": {"profile": False, "profile_save_path": save_path}, "system": system}
