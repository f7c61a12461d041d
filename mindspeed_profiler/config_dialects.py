"""Other frameworks' profiler settings read as ours: MindSpeed-RL, verl and RLinf (docs/migrating.md).

`translate(data)` takes a whole training YAML, or just its profiler blocks, as plain data and returns
a `Translation`: which framework wrote it, our `profiler_config` block, and notes, one per setting
that has no exact equivalent here (each says what is done instead). A value that is wrong in the
framework's own terms is a `ProfilerConfigError` naming the framework's key, all problems together.
`translate` is pure: it writes nothing and logs nothing.

- MindSpeed-RL: its `profiler_config.integrated` is ours (hyphenated keys read as its loader reads
  them, in config.py). Here: `profiler_config.register_stages` (a key MindSpeed-RL's own loader never
  reads, so the YAML still works there) is moved into `integrated`.
- verl: `global_profiler` (tool, steps, profile_continuous_steps, save_path, global_tool_config) and
  each role's `profiler` (enable, all_ranks, ranks, tool_config.<tool>) under actor_rollout_ref.actor
  / .rollout / .ref, critic, reward_model. npu / torch / torch_memory become the `integrated`
  section (per-role ranks as `role_ranks`, discrete as one capture per stage call); nsys becomes the
  `system` section. OmegaConf's plain interpolations (`${a.b}`, `${oc.select:a.b,default}`), which
  verl's trainer YAMLs use between these blocks, are resolved.
- RLinf: `cluster.tracer` (enable, output_file) becomes `tracer`, `cluster.profiling` (or a profile
  preset file on its own) becomes `system`, its 0-based steps counted from 1.

`load_config` calls `find_block` where it looks for the block: the notes go to the
`mindspeed_profiler.config` logger, or to `collect_notes()` (which check-config prints).
"""
from __future__ import annotations

import contextlib
import contextvars
import difflib
import logging
import os
import re
from dataclasses import dataclass
from typing import Any, Iterator, Mapping, Sequence

from mindspeed_profiler import config as C
from mindspeed_profiler import yaml_bounded
from mindspeed_profiler import stages as _stages

__all__ = ["Translation", "translate", "translate_kind", "find_block", "collect_notes", "split_overrides", "DIALECT_TITLES"]

log = logging.getLogger("mindspeed_profiler.config")

DIALECT_TITLES = {"mindspeed_rl": "MindSpeed-RL", "verl": "verl", "rlinf": "RLinf"}
Note = tuple[str, str]  # (where in their config, what happens here)

STAGES_KEY = "register_stages"


@dataclass(frozen=True)
class Translation:
    dialect: str                 # a key of DIALECT_TITLES
    block: dict[str, Any]        # our profiler_config block (integrated / tracer / system)
    notes: tuple[Note, ...]      # settings without an exact equivalent, and what is done instead


# --------------------------------------------------------------------------------------------
# Reading their config: interpolations, checked values, unknown keys
# --------------------------------------------------------------------------------------------

_ABSENT = object()
_INTERPOLATION = re.compile(r"^\$\{(.*)\}$", re.S)
_KEY_PATH = re.compile(r"^[A-Za-z_][\w\-]*(\.[A-Za-z_][\w\-]*)*$")


class _Reader:
    """Their config, read with OmegaConf's plain interpolations resolved; collects problems and notes."""

    def __init__(self, root: Mapping[str, Any]):
        self.root = root
        self.problems: list[tuple[str, str]] = []
        self.notes: list[Note] = []

    def note(self, where: str, message: str) -> None:
        if (where, message) not in self.notes:
            self.notes.append((where, message))

    def _lookup(self, dotted: str, depth: int) -> Any:
        node: Any = self.root
        for part in dotted.split("."):
            node = self.resolve(node, dotted, depth)
            if not isinstance(node, Mapping) or part not in node:
                return _ABSENT
            node = node[part]
        return node

    def resolve(self, value: Any, where: str, depth: int = 0) -> Any:
        """`value` with a whole-value interpolation replaced by what it points at (recursively);
        one this reader cannot follow (another resolver, a relative key) is a note and reads as unset."""
        if not isinstance(value, str):
            return value
        m = _INTERPOLATION.match(value.strip())
        if m is None:
            return value
        expr = m.group(1).strip()
        default: Any = _ABSENT
        if expr.startswith("oc.select:"):
            key, comma, rest = expr[len("oc.select:"):].partition(",")
            expr = key.strip()
            if comma:
                try:
                    default = yaml_bounded.load_value(rest)
                except yaml_bounded.YamlRefused as exc:
                    if len(rest) > yaml_bounded.MAX_VALUE_CHARS or "expand" in str(exc):
                        raise C.ProfilerConfigError([(where, f"the default of {value[:80]!r}...: {exc}")]) from None
                    default = rest.strip()
            else:
                default = None
        if depth > 16:
            self.note(where, f"{value!r} refers to itself (or nests too deep): read as unset")
            return None
        if not _KEY_PATH.match(expr):
            self.note(where, f"{value!r} cannot be resolved without Hydra; read as unset (pass the composed "
                             "DictConfig to load_config, or write the value)")
            return None
        found = self._lookup(expr, depth + 1)
        if found is _ABSENT:
            if default is _ABSENT:
                self.note(where, f"{value!r} points at nothing; read as unset")
                return None
            return default
        return self.resolve(found, where, depth + 1)

    def get(self, node: Any, dotted: str, where: str, default: Any = None) -> Any:
        """node[a][b]... (interpolations resolved at every level), or `default`."""
        for part in dotted.split("."):
            node = self.resolve(node, where)
            if not isinstance(node, Mapping) or part not in node:
                return default
            node = node[part]
        node = self.resolve(node, where)
        return default if node is None and default is not None else node

    def check(self, section: str, field_name: str, value: Any, where: str) -> bool:
        """Check `value` with our field's own checker, reporting at their key. True if valid."""
        before = len(self.problems)
        C._SECTION_SCHEMAS[section][field_name](value, where, self.problems)
        return len(self.problems) == before

    def flag(self, node: Any, key: str, where: str, default: bool) -> bool:
        value = self.get(node, key, f"{where}.{key}")
        if value is None:
            return default
        return value if self.check("integrated", "profile", value, f"{where}.{key}") else default

    def known_keys(self, node: Any, known: Sequence[str], where: str, whose: str) -> None:
        """A key close to a known one is a typo (a problem); any other unknown key is ignored, with a note."""
        if not isinstance(node, Mapping):
            return
        for key in node:
            if key in known:
                continue
            close = difflib.get_close_matches(str(key), list(known), n=1, cutoff=0.8)
            if close:
                self.problems.append((f"{where}.{key}", f"unknown {whose} key {key!r} (did you mean {close[0]!r}?); "
                                                         f"{whose} keys: {', '.join(k for k in known if k != '_target_')}"))
            else:
                self.note(f"{where}.{key}", f"not a {whose} setting: ignored")

    def finish(self, dialect: str, block: dict[str, Any]) -> Translation:
        if self.problems:
            raise C.ProfilerConfigError(self.problems)
        return Translation(dialect, block, tuple(self.notes))


def _mapping(value: Any) -> bool:
    return isinstance(value, Mapping)


# --------------------------------------------------------------------------------------------
# verl
# --------------------------------------------------------------------------------------------

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
    "npu": {"npu": "profile_with_npu", "cpu": "profile_with_cpu", "memory": "profile_with_memory",
            "shapes": "profile_record_shapes", "module": "profile_with_module", "stack": "profile_with_stack"},
    "torch": {"cuda": "profile_with_npu", "cpu": "profile_with_cpu", "memory": "profile_with_memory",
              "shapes": "profile_record_shapes", "stack": "profile_with_stack"},
}
VERL_TORCH_UNMAPPED_CONTENTS = ("profile-by-stage", "merge-profiles")


def _is_verl(data: Mapping[str, Any]) -> bool:
    if _mapping(data.get("global_profiler")):
        return True
    return any(_mapping(_plain_get(data, path)) for path in VERL_ROLE_PATHS.values())


def _plain_get(node: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        if not _mapping(node) or part not in node:
            return None
        node = node[part]
    return node


def _verl_bare(data: Mapping[str, Any]) -> tuple[Mapping[str, Any], Note | None] | None:
    """A verl `global_profiler` body, one role's `profiler` body (a role config file such as verl's
    actor.yaml has it at its top), or a top-level `profiler` holding steps (how verl's Nsight page
    writes global_profiler), as a trainer config, with a note saying how it was read; else None."""
    keys = {k for k in data if k != "_target_"}
    if not keys or keys & set(C.SECTIONS):
        return None
    if keys <= set(VERL_GLOBAL_KEYS) and keys & {"tool", "profile_continuous_steps", "global_tool_config"} and \
            not keys & {"enable", "all_ranks", "ranks", "tool_config"}:
        return {"global_profiler": data}, None
    if keys <= set(VERL_ROLE_KEYS) and keys & {"tool_config", "all_ranks"}:
        return {"actor_rollout_ref": {"actor": {"profiler": data}}}, ("(top level)", "a role's profiler block alone: read as "
                                                                                     "actor_rollout_ref.actor.profiler")
    body = data.get("profiler")
    if _mapping(body) and not _mapping(data.get("global_profiler")):
        if "steps" in body:
            return {"global_profiler": body}, ("profiler", "verl's trainer has no top-level profiler: read as global_profiler")
        if set(body) <= set(VERL_ROLE_KEYS) and set(body) & {"tool_config", "all_ranks", "enable"}:
            return {"actor_rollout_ref": {"actor": {"profiler": body}}}, ("profiler", "a role config's profiler: read as "
                                                                                      "actor_rollout_ref.actor.profiler")
    return None


def from_verl(data: Mapping[str, Any], read_as: Note | None = None) -> Translation:
    """A verl trainer config (or its profiler blocks) as our block; see docs/migrating.md."""
    r = _Reader(data)
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
        r.problems.append((f"{gp_where}.tool", f"got {C._describe(tool)}; allowed: {', '.join(VERL_TOOLS)} or null"))
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
        if not _mapping(block):
            continue
        r.known_keys(block, VERL_ROLE_KEYS, where, "verl role profiler")
        if r.flag(block, "enable", where, False):
            enabled[role] = (where, block)
    role_tools = {role: r.get(b, "tool", f"{w}.tool") for role, (w, b) in enabled.items()}
    if tool is None:
        tool = next((t for t in role_tools.values() if t in VERL_TOOLS), None)
    if tool is None and not _mapping(data.get("global_profiler")):   # a role's block alone: its own tool
        blocks = (r.get(data, w, w) for w in VERL_ROLE_PATHS.values())
        tool = next((t for b in blocks if _mapping(b) for t in [r.get(b, "tool", "tool")] if t in VERL_TOOLS), None)
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
        contents = r.get(tc, "contents", f"{tc_where}.contents") if _mapping(tc) and "contents" in tc else _ABSENT
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
        if not any(_mapping(_plain_get(data, p)) for p in VERL_ROLE_PATHS.values()) and "defaults" in data:
            return ("no role profiler block in this file: verl composes them from its Hydra defaults (actor@..., critic@...); "
                    "pass the composed config (Hydra DictConfig, or verl's _generated_ppo_trainer.yaml)")
        return f"no role has profiler.enable: true ({', '.join(VERL_ROLE_PATHS.values())})"
    return None


def _tool_settings(tc: Any) -> dict[str, Any]:
    return {k: v for k, v in tc.items() if k not in ("_target_", "name")} if _mapping(tc) else {}


def _verl_role_ranks(r: _Reader, enabled: Mapping[str, tuple[str, Any]]) -> dict[str, Any]:
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


def _verl_contents(r: _Reader, tool: str, contents: Any, where: str) -> dict[str, bool]:
    """tool_config.<tool>.contents -> our flags. Absent or [] : host and device activity only (verl's
    documented default); null: everything (verl's NPU profiler reads None as all)."""
    flags = VERL_CONTENTS[tool]
    allowed = tuple(flags) + (VERL_TORCH_UNMAPPED_CONTENTS if tool == "torch" else ())
    if contents is None:
        return {name: True for name in flags.values()}
    if contents is _ABSENT or contents == []:
        return {}
    if not isinstance(contents, (list, tuple)) or not all(isinstance(c, str) for c in contents):
        r.problems.append((where, f"got {C._describe(contents)}; expected a list of: {', '.join(allowed)}"))
        return {}
    bad = [c for c in contents if c not in allowed]
    for c in bad:
        r.problems.append((where, f"unknown content {c!r}; allowed: {', '.join(allowed)}{C._hint(c, allowed)}"))
    for c in contents:
        if c in VERL_TORCH_UNMAPPED_CONTENTS:
            r.note(where, f"{c!r} has no equivalent here: ignored (stage captures come from `stage`, see docs/migrating.md)")
    return {name: content in contents for content, name in flags.items()}


def _verl_discrete(r: _Reader, tool: str, enabled: Mapping[str, tuple[str, Any]], continuous: bool) -> tuple[list[str], list[str]]:
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


def _verl_memory_settings(r: _Reader, gp: Any, tc: Any, tc_where: str) -> None:
    settings = {}
    for key in ("trace_alloc_max_entries", "stack_depth"):
        value = r.get(tc, key, f"{tc_where}.{key}")
        if value is not None:
            settings[key] = value
    where = "global_profiler.global_tool_config.torch_memory"
    gm = r.get(gp, "global_tool_config.torch_memory", where) or {}
    for key in ("context", "stacks", "kw_args"):
        if _mapping(gm) and gm.get(key) not in (None, {}, "all"):
            settings[key] = gm[key]
    if settings:
        shown = ", ".join(f"{k}={v}" for k, v in settings.items())
        r.note(tc_where, f"{shown}: no equivalent; the allocator history here keeps the last "
                         f"200000 events with full stacks")


def _verl_nsys(r: _Reader, gp: Any, steps: Sequence[int], continuous: bool, save_path: str,
               enabled: Mapping[str, tuple[str, Any]]) -> dict[str, Any]:
    """tool: nsys -> our system section (nsight around the enabled roles' worker groups)."""
    where = "global_profiler.global_tool_config.nsys"
    nsys = r.get(gp, "global_tool_config.nsys", where) or {}
    options: dict[str, Any] = {}
    raw = r.get(nsys, "worker_nsight_options", f"{where}.worker_nsight_options") or {}
    for key, value in (raw.items() if _mapping(raw) else ()):
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


# --------------------------------------------------------------------------------------------
# RLinf
# --------------------------------------------------------------------------------------------

RLINF_TRACER_KEYS = ("enable", "output_file")
RLINF_PROFILING_KEYS = ("backend", "enabled", "worker_groups", "steps", "output_dir", "options", "flags", "args", "env")
RLINF_TRACE_FILE = "trace_events.jsonl"


def _rlinf_cluster(data: Mapping[str, Any]) -> tuple[Mapping[str, Any], str] | None:
    """(the mapping holding RLinf's tracer / profiling, how their keys are named): `cluster` of a
    training YAML, a cluster block itself, or a profile preset file (the profiling block alone)."""
    cluster = data.get("cluster")
    if _mapping(cluster) and ({"tracer", "profiling"} & set(cluster) or _rlinf_defaults(data)):
        return cluster, "cluster."
    if _rlinf_defaults(data):
        return {}, "cluster."
    if _mapping(data.get("profiling")) or (_mapping(data.get("tracer")) and "output_file" in data["tracer"]):
        return data, ""
    keys = set(data)
    if "backend" in keys and keys <= set(RLINF_PROFILING_KEYS) and keys - set(C.INTEGRATED_FIELDS):
        return {"profiling": data}, "preset"   # ({backend: ...} alone stays a bare integrated section)
    return None


def _rlinf_defaults(data: Mapping[str, Any]) -> list[str]:
    """Hydra defaults entries that fill cluster.profiling (`profile/default@cluster.profiling`)."""
    entries = data.get("defaults")
    return [e for e in entries if isinstance(e, str) and e.endswith("@cluster.profiling")] if isinstance(entries, list) else []


def from_rlinf(data: Mapping[str, Any], cluster: Mapping[str, Any], prefix: str = "cluster.") -> Translation:
    """RLinf's cluster.tracer / cluster.profiling as our tracer / system sections. `prefix`: how
    their keys are named ("cluster.", "" for a cluster block, "preset" for a profiling block alone)."""
    r = _Reader(data)
    block: dict[str, Any] = {k: cluster[k] for k in ("integrated", "system") if k in cluster}
    tracer = r.get(cluster, "tracer", f"{prefix}tracer")
    if _mapping(tracer):
        block["tracer"] = _rlinf_tracer(r, data, tracer, f"{prefix}tracer")
    profiling = r.get(cluster, "profiling", f"{prefix}profiling")
    if _mapping(profiling):
        if "system" in block:
            r.problems.append((f"{prefix}profiling", "given together with a system section: keep one"))
        else:
            block["system"] = _rlinf_profiling(r, data, profiling, "" if prefix == "preset" else f"{prefix}profiling")
    elif _rlinf_defaults(data):
        r.note("defaults", f"{', '.join(_rlinf_defaults(data))}: the profiling block comes from Hydra's defaults, not in this "
                           "file; pass the composed config (Hydra DictConfig), or check the preset file itself")
    return r.finish("rlinf", block)


def _rlinf_log_dir(r: _Reader, data: Mapping[str, Any], sub: str) -> str | None:
    """RLinf's default output place: <runner.logger.log_path>/<experiment_name>/<sub>, when both are plain."""
    log_path = r.get(data, "runner.logger.log_path", "runner.logger.log_path")
    name = r.get(data, "runner.logger.experiment_name", "runner.logger.experiment_name")
    if isinstance(log_path, str) and isinstance(name, str) and "${" not in log_path + name:
        return os.path.join(log_path, name, sub)
    return None


def _rlinf_tracer(r: _Reader, data: Mapping[str, Any], tracer: Mapping[str, Any], where: str) -> dict[str, Any]:
    r.known_keys(tracer, RLINF_TRACER_KEYS + tuple(C.TRACER_FIELDS), where, "RLinf tracer")
    out = {k: v for k, v in tracer.items() if k in C.TRACER_FIELDS}
    enable = r.get(tracer, "enable", f"{where}.enable")
    if enable is not None and r.check("tracer", "enable", enable, f"{where}.enable"):
        out["enable"] = enable
    output_file = r.get(tracer, "output_file", f"{where}.output_file")
    if isinstance(output_file, str) and output_file.strip():
        directory = os.path.dirname(output_file) or "."
        out.setdefault("output_dir", directory)
        r.note(f"{where}.output_file", f"one JSONL file in RLinf; here each process writes its segment into {directory!r} "
                                       f"and `mindspeed-profiler merge` makes timeline.json there (the name "
                                       f"{os.path.basename(output_file)!r} is not used)")
    elif output_file is not None:
        r.problems.append((f"{where}.output_file", f"got {C._describe(output_file)}; expected a file path or null"))
    elif out.get("enable") and "output_dir" not in out:
        default = _rlinf_log_dir(r, data, "trace")
        if default:
            out["output_dir"] = default
        r.note(f"{where}.output_file", f"null: RLinf writes <log_path>/<experiment_name>/trace/{RLINF_TRACE_FILE}; here the "
                                       f"segments and the merged timeline.json go to {default or '<profile_save_path>/timeline'}")
    return out


def _rlinf_profiling(r: _Reader, data: Mapping[str, Any], prof: Mapping[str, Any], where: str) -> dict[str, Any]:
    """cluster.profiling (`where`; "" for a preset file) -> our system section."""
    def at(key: str) -> str:
        return f"{where}.{key}" if where else key

    r.known_keys(prof, RLINF_PROFILING_KEYS, where, "RLinf profiling")
    out = {k: r.get(prof, k, at(k)) for k in RLINF_PROFILING_KEYS if k in prof}
    if out.get("backend") is None and out.get("enabled", True):
        r.problems.append((at("backend"), f"is required (RLinf requires it too); allowed: {', '.join(C.system_backend_choices())}"))
    for key in ("worker_groups", "flags"):   # RLinf takes one name as a string
        if isinstance(out.get(key), str) and not (key == "worker_groups" and out[key].lower() == C.ALL_GROUPS):
            out[key] = [out[key]]
    if out.get("flags") is None:
        out.pop("flags", None)
    steps = out.get("steps")
    if steps is not None:
        if isinstance(steps, (list, tuple)) and all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in steps):
            out["steps"] = [s + 1 for s in steps]
            if steps:
                r.note(at("steps"), f"RLinf counts training steps from 0 (global_step), this library from 1: "
                                    f"{list(steps)} -> {out['steps']}")
        else:
            r.problems.append((at("steps"), f"got {C._describe(steps)}; expected a list of RLinf step indices >= 0 "
                                            "(global_step, counted from 0)"))
            out.pop("steps")
    options = out.get("options")
    if _mapping(options):
        out["options"] = _rlinf_nsys_options(r, options, out.get("steps") or [], at("options"))
    if out.get("enabled", True) and out.get("output_dir") is None:
        default = _rlinf_log_dir(r, data, "profiling")
        if default:
            out["output_dir"] = default
            r.note(at("output_dir"), f"null: RLinf's default place, {default!r}, is kept")
    return out


def _rlinf_nsys_options(r: _Reader, options: Mapping[str, Any], steps: Sequence[int], where: str) -> dict[str, Any]:
    """RLinf's nsys option spellings: booleans as lower-case strings, the `stop-on-range-end` alias,
    and `capture-range-end: stop` with several steps (nsys then ignores every range after the first)."""
    out = {str(k): (str(v).lower() if isinstance(v, bool) else v) for k, v in options.items()}
    if "stop-on-range-end" in out:
        alias = str(out.pop("stop-on-range-end")).strip().lower()
        if "capture-range-end" in out:
            r.problems.append((f"{where}.stop-on-range-end", "given together with capture-range-end (RLinf refuses both too): keep one"))
        else:
            out["capture-range-end"] = "stop" if alias in ("true", "1", "yes", "on") else "none" if alias in ("false", "0", "no", "off") else alias
    end = str(out.get("capture-range-end", "")).lower()
    if len(steps) > 1 and end in ("stop", "stop-shutdown"):
        del out["capture-range-end"]
        r.note(f"{where}.capture-range-end", f"{end!r} with {len(steps)} steps captures only the first step (nsys ignores "
                                             f"later ranges); left out, so each step's range is captured (repeat:{len(steps)})")
    return out


# --------------------------------------------------------------------------------------------
# MindSpeed-RL (our own block) and the dispatch
# --------------------------------------------------------------------------------------------

def _with_declared_stages(data: Mapping[str, Any]) -> Translation | None:
    """profiler_config.register_stages (where MindSpeed-RL's loader, which reads only `integrated`,
    never looks) moved into `integrated`; None when there is nothing to move."""
    block = C._to_container(data[C.ROOT_KEY])
    if not _mapping(block) or STAGES_KEY not in block:
        return None
    block = dict(block)
    names = block.pop(STAGES_KEY)
    integ = block.get("integrated")
    if integ is not None and not _mapping(integ):
        return None   # validate() reports the section
    integ = dict(integ or {})
    if STAGES_KEY in integ:
        both = [integ[STAGES_KEY], names]
        merged = [n for v in both for n in ([v] if isinstance(v, str) else v if isinstance(v, (list, tuple)) else [v])]
        integ[STAGES_KEY] = list(dict.fromkeys(merged))
    else:
        integ[STAGES_KEY] = names
    block["integrated"] = integ
    return Translation("mindspeed_rl", block, ())


def _foreign_parts(data: Mapping[str, Any]) -> list[Note]:
    """verl / RLinf profiler settings in a YAML that also has profiler_config (which wins)."""
    notes = []
    gp = data.get("global_profiler")
    if _mapping(gp) and gp.get("tool") is not None:
        notes.append(("global_profiler", f"not read: {C.ROOT_KEY} is present and decides"))
    cluster = data.get("cluster")
    for part in ("tracer", "profiling"):
        if _mapping(cluster) and _mapping(cluster.get(part)):
            notes.append((f"cluster.{part}", f"not read: {C.ROOT_KEY} is present and decides"))
    return notes


def translate(data: Any) -> Translation | None:
    """The framework's settings in `data` (a whole training YAML or its profiler blocks, plain data)
    as our block, or None when `data` is ours (or no framework's) and needs nothing."""
    if not _mapping(data):
        return None
    if C.ROOT_KEY in data:
        moved = _with_declared_stages(data)
        notes = tuple(_foreign_parts(data))
        if moved is None and not notes:
            return None
        if moved is None:
            block = C._to_container(data[C.ROOT_KEY])
            if not _mapping(block):
                return None
            moved = Translation("mindspeed_rl", dict(block), ())
        return Translation(moved.dialect, moved.block, notes)
    bare = _verl_bare(data)
    if bare is not None:
        return from_verl(*bare)
    if _is_verl(data):
        return from_verl(data)
    cluster = _rlinf_cluster(data)
    if cluster is not None:
        return from_rlinf(data, *cluster)
    return None


# --------------------------------------------------------------------------------------------
# Where the notes go; overrides in the framework's own keys
# --------------------------------------------------------------------------------------------

_collector: contextvars.ContextVar[list | None] = contextvars.ContextVar("mindspeed_profiler_dialect_notes", default=None)


@contextlib.contextmanager
def collect_notes() -> Iterator[list[tuple[str, str, str]]]:
    """Within it, load_config's translation notes are gathered as (framework, where, what) instead of logged."""
    notes: list[tuple[str, str, str]] = []
    token = _collector.set(notes)
    try:
        yield notes
    finally:
        _collector.reset(token)


def find_block(data: Any) -> dict[str, Any] | None:
    """config.py's hook: our block for a framework's config (its notes reported), else None."""
    found = translate(data)
    if found is None:
        return None
    sink = _collector.get()
    for where, message in found.notes:
        if sink is not None:
            sink.append((DIALECT_TITLES[found.dialect], where, message))
        else:
            log.warning("%s config: %s: %s", DIALECT_TITLES[found.dialect], where, message)
    return found.block


def split_overrides(data: Any, overrides: Sequence[str]) -> tuple[Any, list[str]]:
    """For a verl or RLinf config: apply the overrides written in its own keys (Hydra style,
    `global_profiler.steps=[1,2]`, `+cluster.tracer.enable=true`) to a copy of it, and return the
    copy with the overrides that address our block (`profiler_config.`, `integrated.`, ...)."""
    if not _mapping(data) or C.ROOT_KEY in data or translate_kind(data) is None:
        return data, list(overrides)
    data = C._deep_copy(data)
    ours: list[str] = []
    for text in overrides:
        key, eq, raw = text.partition("=")
        parts = [p for p in key.strip().lstrip("+").split(".") if p]
        if not eq or not parts or parts[0] in (C.ROOT_KEY,) + C.SECTIONS:
            ours.append(text)
            continue
        try:
            value = yaml_bounded.load_value(raw)
        except yaml_bounded.YamlRefused as exc:
            raise C.ProfilerConfigError([(text[:120], f"value: {exc}")]) from None
        node = data
        for part in parts[:-1]:
            if not isinstance(node.get(part), dict):
                node[part] = {}
            node = node[part]
        node[parts[-1]] = value
    return data, ours


def translate_kind(data: Mapping[str, Any]) -> str | None:
    """Which framework's layout `data` has ('verl', 'rlinf'), without translating it."""
    if _verl_bare(data) is not None or _is_verl(data):
        return "verl"
    if _rlinf_cluster(data) is not None:
        return "rlinf"
    return None
