"""Config dialects (mindspeed_profiler/config/dialects/): MindSpeed-RL, verl and RLinf configs read as ours.

The table below loads real files from the three frameworks' repositories (tests/data/dialects/,
copied unchanged at a pinned commit: tests/data/README.md), as their users have them: whole
training YAMLs, profile presets, the YAML blocks of their profiler docs (merged into the trainer
config they belong to, with the tool the page is about), and verl's example launch scripts (their
Hydra overrides applied to verl's composed trainer config). Each row says what must come out and
which notes must be printed; the other tests cover the pieces (errors at their keys, hyphenated
keys, declared stages, per-role ranks and per-step captures at runtime, the CLI).
"""
from __future__ import annotations

import dataclasses
import logging
import re
import shlex
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

from mindspeed_profiler import IntegratedProfiler, ProfilerConfigError, load_config
from mindspeed_profiler.capture import stages as stage_registry
from mindspeed_profiler.cli import main as cli_main
from mindspeed_profiler.config.dialects import collect_notes, translate
from mindspeed_profiler.config.load import split_overrides
from profiler_testutil import train

DATA = Path(__file__).parent / "data" / "dialects"
MSRL, VERL, RLINF = DATA / "mindspeed_rl", DATA / "verl", DATA / "rlinf"
VERL_TRAINER = VERL / "config" / "_generated_ppo_trainer.yaml"
VERL_MEGATRON = VERL / "config" / "_generated_ppo_megatron_trainer.yaml"
HOME = "/home/verl"   # $HOME in verl's example scripts

# --------------------------------------------------------------------------------------------
# Reading the sources as their users have them
# --------------------------------------------------------------------------------------------


def doc_blocks(path: Path) -> list[str]:
    """The YAML blocks of a Markdown (```yaml) or reStructuredText (.. code-block:: yaml) page."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".md":
        return [textwrap.dedent(b) for b in re.findall(r"```ya?ml\n(.*?)```", text, re.S)]
    blocks, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        if re.match(r"\s*\.\. code(-block)?:: yaml\s*$", lines[i]):
            body, i = [], i + 1
            while i < len(lines) and (not lines[i].strip() or lines[i].startswith((" ", "\t"))):
                body.append(lines[i])
                i += 1
            blocks.append(textwrap.dedent("\n".join(body)))
        else:
            i += 1
    return blocks


def script_overrides(path: Path) -> tuple[list[str], str | None]:
    """A verl launch script's Hydra overrides of profiler settings (its shell variables expanded),
    and the --config-name it runs."""
    text = path.read_text(encoding="utf-8")
    env = {"HOME": HOME}

    def expand(word: str) -> str:
        return re.sub(r"\$\{?(\w+)\}?", lambda m: env.get(m.group(1), m.group(0)), word)

    for name, value in re.findall(r"^([A-Z_]+)=(\S+)", text, re.M):
        env[name] = expand(shlex.split(value)[0] if value.strip("\"'") else "")
    config = re.search(r"--config-name=['\"]?(\w+)", text)
    overrides = [expand(token) for token in shlex.split(text.replace("\\\n", " "), comments=True)
                 if "=" in token and "profiler" in token.split("=", 1)[0]]
    return overrides, config.group(1) if config else None


def merged(base: Any, fragment: Any) -> Any:
    """`fragment` written into `base` (a docs block pasted into the trainer YAML)."""
    if isinstance(base, dict) and isinstance(fragment, dict):
        return {**base, **{k: merged(base.get(k), v) for k, v in fragment.items()}}
    return fragment


@dataclasses.dataclass(frozen=True)
class Source:
    path: Path
    block: int | None = None        # the n-th YAML block of a docs page
    into: Path | None = None        # paste it into this trainer config
    overrides: tuple[str, ...] = () # Hydra overrides in the framework's own keys
    script: bool = False            # a verl launch script: its overrides onto verl's composed config

    def load(self):
        if self.script:
            overrides, config_name = script_overrides(self.path)
            data = yaml.safe_load((VERL_MEGATRON if config_name == "ppo_megatron_trainer" else VERL_TRAINER).read_text())
        elif self.block is not None:
            data = yaml.safe_load(doc_blocks(self.path)[self.block])
            if self.into is not None:
                data = merged(yaml.safe_load(self.into.read_text()), data)
            overrides = list(self.overrides)
        else:
            return load_config(self.path, check_paths=False)
        data, ours = split_overrides(data, overrides)
        return load_config(data, ours, check_paths=False)

    def __str__(self) -> str:
        extra = f"[{self.block}]" if self.block is not None else ""
        return f"{self.path.relative_to(DATA)}{extra}" + (" " + " ".join(self.overrides) if self.overrides else "")


def value_at(cfg, dotted: str) -> Any:
    node: Any = cfg.to_dict()["profiler_config"]
    for part in dotted.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return node


# --------------------------------------------------------------------------------------------
# The table
# --------------------------------------------------------------------------------------------

MSRL_ST = {"integrated.profile": True, "integrated.mstx": False, "integrated.stage": "actor_update",
           "integrated.profile_save_path": "./profiler_data", "integrated.profile_export_type": "db",
           "integrated.profile_step_start": 1, "integrated.profile_step_end": 2, "integrated.profile_level": "level1",
           "integrated.profile_with_memory": False, "integrated.profile_record_shapes": False,
           "integrated.profile_with_cpu": True, "integrated.profile_with_npu": True, "integrated.profile_with_module": False,
           "integrated.profile_analysis": True, "integrated.profile_ranks": [0, 1], "system": None}
MSRL_DOC_DEFAULTS = {"integrated.profile": False, "integrated.stage": "all", "integrated.profile_level": "level1",
                     "integrated.profile_export_type": "text", "integrated.profile_ranks": "all", "integrated.profile_analysis": False}
MSRL_LIGHTWEIGHT = {"integrated.profile": True, "integrated.mstx": True, "integrated.profile_level": "level_none",
                    "integrated.profile_with_cpu": False, "integrated.profile_with_npu": True}
VERL_OFF = {"integrated.profile": False, "system": None}
VERL_NPU = {"integrated.profile": True, "integrated.backend": "npu", "integrated.profile_export_type": "db",
            "integrated.mstx": True, "integrated.mstx_domain_exclude": ["communication"], "integrated.profile_level": "level0",
            "integrated.profile_analysis": True, "integrated.profile_with_cpu": True, "integrated.profile_with_npu": True,
            "integrated.profile_with_memory": False, "integrated.profile_record_shapes": False,
            "integrated.profile_with_module": False, "integrated.profile_with_stack": False,
            "integrated.profile_steps_continuous": False, "integrated.profile_ranks": "all", "system": None}
VERL_NSYS_OPTIONS = {"trace": "cuda,nvtx,cublas,ucx", "cuda-memory-usage": "true", "cuda-graph-trace": "graph",
                     "capture-range": "cudaProfilerApi", "kill": "none"}
RLINF_PRESET_OPTIONS = {"t": "cuda,cudnn,cublas,nvtx,osrt", "sample": "process-tree", "cpuctxsw": "process-tree",
                        "cudabacktrace": "all", "osrt-threshold": "1000"}

ROWS: list[tuple[str, Source, dict[str, Any], list[str]]] = [
    # --- MindSpeed-RL: its integrated system-test configs across releases, and its profiler docs ---
    ("mindspeed_rl", Source(MSRL / "2.0.0" / "test_grpo_trainer_qwen25_7b_integrated.yaml"), MSRL_ST, []),
    ("mindspeed_rl", Source(MSRL / "2.1.0" / "test_grpo_trainer_qwen25_7b_integrated.yaml"), MSRL_ST, []),
    ("mindspeed_rl", Source(MSRL / "2.2.0" / "test_dapo_trainer_qwen25_7b_integrated.yaml"), MSRL_ST, []),
    ("mindspeed_rl", Source(MSRL / "2.2.0" / "test_ppo_trainer_qwen25_7b_integrated.yaml"), MSRL_ST, []),
    ("mindspeed_rl", Source(MSRL / "2.3.0" / "test_grpo_trainer_qwen25_7b_integrated.yaml"), MSRL_ST, []),
    ("mindspeed_rl", Source(MSRL / "master" / "test_ppo_trainer_qwen25_7b_integrated.yaml"),
     {**MSRL_ST, "integrated.profile_ranks": [0]}, []),
    ("mindspeed_rl", Source(MSRL / "2.0.0" / "profiler.md", 0), MSRL_DOC_DEFAULTS, []),
    ("mindspeed_rl", Source(MSRL / "2.0.0" / "profiler.md", 1), MSRL_LIGHTWEIGHT, []),
    ("mindspeed_rl", Source(MSRL / "master" / "profiler.md", 0), MSRL_DOC_DEFAULTS, []),
    ("mindspeed_rl", Source(MSRL / "master" / "profiler.md", 1),      # its DPO block
     {"integrated.profile": True, "integrated.profile_level": "level1", "integrated.profile_ranks": "all",
      "integrated.stage": "all", "integrated.warmup_steps": 0}, []),
    ("mindspeed_rl", Source(MSRL / "master" / "profiler.md", 2), MSRL_LIGHTWEIGHT, []),
    # --- verl: its trainer configs as shipped (profiling off: tool null) ---
    ("verl", Source(VERL_TRAINER), VERL_OFF, ["global_profiler.tool is null"]),
    ("verl", Source(VERL_MEGATRON), VERL_OFF, ["global_profiler.tool is null"]),
    ("verl", Source(VERL / "config" / "ppo_trainer.yaml"), VERL_OFF, ["global_profiler.tool is null"]),
    ("verl", Source(VERL / "config" / "profiler.yaml"), VERL_OFF,
     ["read as actor_rollout_ref.actor.profiler", "global_profiler.steps is None"]),
    # --- verl 0.9.1 as it ships (the wheel's files; tests/test_verl_real.py holds them against the installed verl) ---
    ("verl", Source(VERL / "0.9.1" / "_generated_ppo_trainer.yaml"), VERL_OFF, ["global_profiler.tool is null"]),
    ("verl", Source(VERL / "0.9.1" / "_generated_ppo_megatron_trainer.yaml"), VERL_OFF, ["global_profiler.tool is null"]),
    ("verl", Source(VERL / "0.9.1" / "ppo_trainer.yaml"), VERL_OFF, ["global_profiler.tool is null"]),
    ("verl", Source(VERL / "0.9.1" / "profiler.yaml"), VERL_OFF,
     ["read as actor_rollout_ref.actor.profiler", "global_profiler.steps is None"]),
    # --- verl: its example launch scripts ---
    ("verl", Source(VERL / "examples" / "run_qwen2_5_7b_grpo_discrete_prof_npu.sh", script=True),
     {**VERL_NPU, "integrated.profile_steps": [2, 4], "integrated.profile_save_path": f"{HOME}/profile_data",
      "integrated.role_ranks": {"actor": [1, 2], "rollout": [1, 2], "ref": [1, 2]},
      "integrated.stage": ["actor_update", "actor_compute_log_prob", "actor_generate", "reference_compute_log_prob"]}, []),
    ("verl", Source(VERL / "examples" / "run_qwen2_5_7b_grpo_e2e_prof_npu.sh", script=True),
     {**VERL_NPU, "integrated.profile_steps": [2, 4], "integrated.profile_save_path": f"{HOME}/profile_data",
      "integrated.role_ranks": {"actor": "all", "rollout": "all", "ref": "all"}, "integrated.stage": "all"}, []),
    ("verl", Source(VERL / "examples" / "run_deepseek_math_gsm8k_megatron_nsys.sh", script=True),
     {"integrated.profile": False, "integrated.profile_save_path": "outputs/profile", "system.backend": "nsight",
      "system.enabled": True, "system.worker_groups": ["actor", "rollout", "critic"], "system.steps": [1],
      "system.options": VERL_NSYS_OPTIONS},
     ["controller_nsight_options: no equivalent", "discrete: no equivalent for nsys", "ranks are not applied to nsys"]),
    ("verl", Source(VERL / "examples" / "run_qwen2-7b_rm_seq_balance_nsys.sh", script=True),
     {"integrated.profile": False, "system.backend": "nsight", "system.worker_groups": ["actor", "rollout", "critic"],
      "system.steps": [1, 2, 5], "system.options": VERL_NSYS_OPTIONS},
     ["one capture range per step, also for consecutive steps", "ranks are not applied to nsys"]),
    # --- verl: the YAML blocks of its profiler docs, pasted into the trainer config ---
    ("verl", Source(VERL / "docs" / "ascend_profiling_en.rst", 0), VERL_OFF, ["global_profiler.tool is null"]),
    ("verl", Source(VERL / "docs" / "ascend_profiling_en.rst", 1, VERL_TRAINER, ("global_profiler.tool=npu",)),
     {**VERL_NPU, "integrated.profile_steps": [1, 2, 5], "integrated.profile_save_path": "./outputs/profile",
      "integrated.role_ranks": {"actor": "all", "rollout": "all"}, "integrated.stage": "all"}, []),
    ("verl", Source(VERL / "docs" / "ascend_profiling_en.rst", 2, VERL_TRAINER, ("global_profiler.tool=npu",)),
     {**VERL_NPU, "integrated.profile_steps": [1, 2, 5], "integrated.role_ranks": {"actor": [0], "rollout": [0]},
      "integrated.stage": ["actor_update", "actor_compute_log_prob", "actor_generate"]},
     ["rollout.profiler.tool_config.npu: differs from actor_rollout_ref.actor.profiler.tool_config.npu",
      "also captures ref_compute_log_prob"]),
    ("verl", Source(VERL / "docs" / "torch_profiling.md", 0, VERL_TRAINER, ("global_profiler.tool=torch",)),
     {"integrated.profile": True, "integrated.backend": "torch", "integrated.profile_steps": [1, 2, 5],
      "integrated.profile_with_cpu": True, "integrated.profile_with_npu": True, "integrated.profile_with_memory": False,
      "integrated.role_ranks": {"actor": "all", "rollout": "all"}, "integrated.stage": "all", "integrated.mstx": False}, []),
    ("verl", Source(VERL / "docs" / "torch_profiling.md", 1, VERL_TRAINER,
                    ("global_profiler.tool=torch", "global_profiler.steps=[1,2,5]")),
     {"integrated.profile": True, "integrated.backend": "torch", "integrated.role_ranks": {"actor": [0], "rollout": [0]},
      "integrated.stage": ["actor_update", "actor_compute_log_prob", "actor_generate"]}, []),
    ("verl", Source(VERL / "docs" / "nsight_profiling.md", 0), VERL_OFF,
     ["read as global_profiler", "global_profiler.tool is null"]),
    ("verl", Source(VERL / "docs" / "nsight_profiling.md", 1, VERL_TRAINER, ("global_profiler.tool=nsys",)),
     {"integrated.profile": False, "system.backend": "nsight", "system.steps": [1, 2, 5],
      "system.worker_groups": ["actor", "rollout", "critic", "reward_model"], "system.options": VERL_NSYS_OPTIONS},
     ["global_profiler.discrete: not a verl global_profiler setting: ignored"]),
    ("verl", Source(VERL / "docs" / "nsight_profiling.md", 2), VERL_OFF,
     ["read as global_profiler", "profiler.discrete: not a verl global_profiler setting"]),
    # --- RLinf: its profile preset, a tracer-enabled training config, the blocks of its profiling guide ---
    ("rlinf", Source(RLINF / "profile" / "default.yaml"),
     {"integrated.profile": False, "system.backend": "nsight", "system.enabled": True,
      "system.worker_groups": ["ActorGroup", "RolloutGroup", "EnvGroup"], "system.options": RLINF_PRESET_OPTIONS,
      "system.flags": [], "system.steps": None, "tracer.enable": False}, []),
    ("rlinf", Source(RLINF / "e2e" / "libero_spatial_ppo_openpi.yaml"),
     {"integrated.profile": False, "tracer.enable": True, "system": None,
      "tracer.output_dir": "../results/libero_spatial_ppo_openpi/test_openpi/trace"}, ["RLinf writes <log_path>"]),
    ("rlinf", Source(RLINF / "docs" / "profile.rst", 0), {"integrated.profile": False, "system": None},
     ["profile/default@cluster.profiling: the profiling block comes from Hydra's defaults"]),
    ("rlinf", Source(RLINF / "docs" / "profile.rst", 1), {"system.backend": "nsight", "system.enabled": False}, []),
    ("rlinf", Source(RLINF / "docs" / "profile.rst", 2), {"system.output_dir": "/mnt/public/profiles/my_run"}, []),
    ("rlinf", Source(RLINF / "docs" / "profile.rst", 3), {"system.worker_groups": ["ActorGroup", "RolloutGroup"]}, []),
    ("rlinf", Source(RLINF / "docs" / "profile.rst", 4), {"system.steps": [4], "system.enabled": True},
     ["RLinf counts training steps from 0 (global_step), this library from 1: [3] -> [4]"]),
    ("rlinf", Source(RLINF / "docs" / "profile.rst", 6),
     {"system.worker_groups": ["ActorGroup", "RolloutGroup", "EnvGroup", "Actor", "Rollout", "Env"],
      "system.options": RLINF_PRESET_OPTIONS}, []),
    ("rlinf", Source(RLINF / "docs" / "profile.rst", 7),
     {"system.options": {"t": "cuda,cudnn,cublas,nvtx,osrt", "sample": "process-tree", "backtrace": "fp",
                         "capture-range": "cudaProfilerApi", "capture-range-end": "stop"},
      "system.flags": ["python-backtrace"]}, []),
    ("rlinf", Source(RLINF / "docs" / "profile.rst", 8),
     {"system.backend": "rocprof_sys", "system.args": {"T": "hip"}, "system.worker_groups": ["ActorGroup", "RolloutGroup", "EnvGroup"]}, []),
    ("rlinf", Source(RLINF / "docs" / "profile.rst", 9),
     {"system.backend": "rocprof_sys", "system.args": {"T": "hip,hsa,rccl", "output-format": "json"}}, []),
    ("rlinf", Source(RLINF / "docs" / "profile.rst", 10),
     {"system.backend": "rocprof_sys", "system.env": {"ROCPROFSYS_SAMPLING_FREQ": "100"}}, []),
    ("rlinf", Source(RLINF / "docs" / "profile.rst", 11), {"system.backend": "rocprof_sys", "system.args": {"T": "hip"}}, []),
    ("rlinf", Source(RLINF / "docs" / "profile.rst", 12), {"tracer.enable": True, "tracer.output_dir": None},
     ["here the segments and the merged timeline.json go to <profile_save_path>/timeline"]),
]


@pytest.mark.parametrize("dialect, source, expected, notes", ROWS, ids=[f"{d}:{s}" for d, s, _, _ in ROWS])
def test_real_configs_load_to_the_expected_values(dialect, source, expected, notes):
    with collect_notes() as got_notes:
        cfg = source.load()
    for dotted, want in expected.items():
        assert value_at(cfg, dotted) == want, f"{source}: {dotted}"
    text = "\n".join(f"{where}: {msg}" for _, where, msg in got_notes)
    for fragment in notes:
        assert fragment in text, f"{source}: no note saying {fragment!r}; notes:\n{text}"
    if dialect == "mindspeed_rl":
        assert not got_notes   # MindSpeed-RL's blocks are ours: nothing to say
    assert {f for f, _, _ in got_notes} <= {"verl": {"verl"}, "rlinf": {"RLinf"}, "mindspeed_rl": set()}[dialect]


def test_rlinf_guide_block_without_backend_is_an_error_at_their_key():
    with pytest.raises(ProfilerConfigError) as err:
        Source(RLINF / "docs" / "profile.rst", 5).load()
    assert [p for p, _ in err.value.problems] == ["cluster.profiling.backend"]
    assert "nsight" in str(err.value)


def test_every_doc_block_and_data_file_is_in_the_table():
    """A block added to a page, or a file added to tests/data/dialects, gets a row."""
    covered = {(s.path, s.block) for _, s, _, _ in ROWS} | {(RLINF / "docs" / "profile.rst", 5)}
    for page in [*MSRL.glob("*/profiler.md"), *(VERL / "docs").iterdir(), RLINF / "docs" / "profile.rst"]:
        for k in range(len(doc_blocks(page))):
            assert (page, k) in covered, f"{page.relative_to(DATA)} block {k}"
    for path in DATA.rglob("*"):
        if path.is_file() and path.suffix in (".yaml", ".sh"):
            assert (path, None) in covered or path in (VERL_TRAINER, VERL_MEGATRON), path


# --------------------------------------------------------------------------------------------
# Wrong values in their terms: errors at their keys, all together
# --------------------------------------------------------------------------------------------


def verl_config(**role: Any) -> dict[str, Any]:
    profiler = {"enable": True, "all_ranks": True, "tool_config": {"npu": {"level": "level1", "contents": ["npu"]}}}
    profiler.update(role)
    return {"global_profiler": {"tool": "npu", "steps": [1, 2]}, "actor_rollout_ref": {"actor": {"profiler": profiler}}}


def test_verl_bad_values_are_reported_at_verl_keys_together():
    data = verl_config(ranks="0", all_ranks=False, tool_config={"npu": {"level": "level9", "contents": ["npu", "disk"]}})
    data["global_profiler"].update(steps=[0, 2], save_path=3)
    with pytest.raises(ProfilerConfigError) as err:
        load_config(data)
    paths = [p for p, _ in err.value.problems]
    assert paths == ["global_profiler.steps", "global_profiler.save_path", "actor_rollout_ref.actor.profiler.ranks",
                     "actor_rollout_ref.actor.profiler.tool_config.npu.contents",
                     "actor_rollout_ref.actor.profiler.tool_config.npu.level"]
    text = str(err.value)
    assert "'level9'" in text and "level_none, level0, level1, level2" in text
    assert "unknown content 'disk'; allowed: npu, cpu, memory, shapes, module, stack" in text


def test_verl_tool_and_typos():
    with pytest.raises(ProfilerConfigError, match=r"global_profiler.tool: got 'nsight' \(str\); allowed: npu, nsys, torch, torch_memory"):
        load_config({"global_profiler": {"tool": "nsight", "steps": [1]}})
    with pytest.raises(ProfilerConfigError, match=r"global_profiler.tool: got 'nsight'"):
        load_config({**verl_config(), "global_profiler": {"tool": "nsight", "steps": [1]}})
    with pytest.raises(ProfilerConfigError, match=r"global_profiler.stpes: unknown verl global_profiler key 'stpes' \(did you mean 'steps'\?\)"):
        load_config({"global_profiler": {"tool": "npu", "stpes": [1]}})
    with pytest.raises(ProfilerConfigError, match=r"trainer.profile_steps: .*volcengine/verl#2894"):
        load_config({"trainer": {"profile_steps": [1]}, "actor_rollout_ref": {"actor": {"profiler": {"discrete": True}}}})


def test_verl_contents_and_tools():
    npu = load_config(verl_config(tool_config={"npu": {"contents": ["memory", "shapes", "module", "stack"]}})).integrated
    # verl 0.9 records CPU activity whatever `contents` says (its stage markers are CPU events)
    assert (npu.profile_with_npu, npu.profile_with_cpu, npu.profile_with_memory, npu.profile_record_shapes,
            npu.profile_with_module, npu.profile_with_stack) == (False, True, True, True, True, True)
    with pytest.raises(ProfilerConfigError, match=r"tool_config.npu.contents: got None"):   # verl 0.9's NPUToolConfig refuses it
        load_config(verl_config(tool_config={"npu": {"contents": None}}))
    data = verl_config(tool_config={"torch_memory": {"trace_alloc_max_entries": 5000, "stack_depth": 8}})
    data["global_profiler"]["tool"] = "torch_memory"
    with collect_notes() as notes:
        mem = load_config(data).integrated
    assert mem.profile and mem.profile_with_memory and mem.backend == "auto"
    assert any("trace_alloc_max_entries=5000, stack_depth=8: no equivalent" in msg for _, _, msg in notes)
    data = verl_config(tool_config={"torch": {"contents": ["cuda"]}})
    data["global_profiler"]["tool"] = "torch"
    torch_cfg = load_config(data).integrated
    assert torch_cfg.backend == "torch" and torch_cfg.profile_with_npu and torch_cfg.profile_with_cpu
    data = verl_config(tool_config={"torch": {"contents": ["cuda", "profile-by-stage"]}})   # verl < 0.9's; 0.9.1 refuses it
    data["global_profiler"]["tool"] = "torch"
    with pytest.raises(ProfilerConfigError, match=r"tool_config.torch.contents: unknown content 'profile-by-stage'"):
        load_config(data)


def test_verl_empty_ranks_mean_rank_zero_and_reward_model_stage_is_declared():
    data = verl_config(all_ranks=False, ranks=[], tool_config={"npu": {"discrete": True}})
    data["reward_model"] = {"profiler": {"enable": True, "all_ranks": True, "tool_config": {"npu": {"discrete": True}}}}
    with collect_notes() as notes:
        integ = load_config(data).integrated
    assert dict(integ.role_ranks) == {"actor": (0,), "reward_model": "all"}   # what verl's DistProfiler does: exact, no note
    assert integ.register_stages == ("compute_rm_score",) and "compute_rm_score" in integ.stage
    assert not any(".ranks" in where for _, where, _ in notes)


def test_verl_interpolations_are_resolved_and_unresolvable_ones_said():
    data = verl_config(ranks="${oc.select:shared.ranks,[3]}", all_ranks=False, save_path="${oc.env:HOME}")
    data["shared"] = {"ranks": [5, 6]}
    with collect_notes() as notes:
        integ = load_config(data).integrated
    assert dict(integ.role_ranks) == {"actor": (5, 6)}
    del data["shared"]
    assert dict(load_config(data).integrated.role_ranks) == {"actor": (3,)}
    assert not notes   # save_path of a role is not read (global_profiler.save_path decides)
    data["global_profiler"]["save_path"] = "${oc.env:HOME}"
    with collect_notes() as notes:
        assert load_config(data).integrated.profile_save_path == "outputs/profile"
    assert any("cannot be resolved without Hydra" in msg for _, _, msg in notes)
    data["global_profiler"]["steps"] = "${global_profiler.steps}"   # circular: a note, not a crash
    with collect_notes() as notes:
        assert not load_config(data).integrated.profile
    assert any("refers to itself" in msg for _, _, msg in notes)


def test_rlinf_spellings():
    with collect_notes() as notes:
        cfg = load_config({"cluster": {"profiling": {"backend": "nsight", "worker_groups": "ActorGroup", "flags": "python-backtrace",
                                                     "steps": [0, 4], "options": {"stop-on-range-end": True, "cuda-memory-usage": True}}}},
                          check_paths=False)
    assert cfg.system.worker_groups == ("ActorGroup",) and cfg.system.flags == ("python-backtrace",)
    assert cfg.system.steps == (1, 5)
    # the alias read as RLinf reads it (stop), then left out: with two steps nsys would capture only the first
    assert dict(cfg.system.options) == {"cuda-memory-usage": "true"}
    assert [where for _, where, _ in notes] == ["cluster.profiling.steps", "cluster.profiling.options.capture-range-end"]
    one_step = load_config({"cluster": {"profiling": {"backend": "nsight", "steps": [2], "options": {"stop-on-range-end": True}}}},
                           check_paths=False)
    assert dict(one_step.system.options) == {"capture-range-end": "stop"}
    with pytest.raises(ProfilerConfigError) as err:
        load_config({"cluster": {"tracer": {"enable": "yes", "output_fle": "x.jsonl"}, "profiling": {"backend": "nsight", "steps": [-1]}}})
    assert [p for p, _ in err.value.problems] == ["cluster.tracer.output_fle", "cluster.tracer.enable", "cluster.profiling.steps"]


def test_our_own_bare_sections_are_not_taken_for_a_framework():
    assert load_config({"backend": "torch"}).integrated.backend == "torch"
    assert translate({"backend": "torch"}) is None and translate({"integrated": {"profile": True}}) is None
    assert translate({"tracer": {"enable": True}}) is None


def test_rlinf_output_file_becomes_the_segment_directory(tmp_path):
    with collect_notes() as notes:
        cfg = load_config({"cluster": {"tracer": {"enable": True, "output_file": str(tmp_path / "trace" / "trace_events.jsonl")}}})
    assert cfg.tracer.enable and cfg.tracer.output_dir == str(tmp_path / "trace")
    assert any("the name 'trace_events.jsonl' is not used" in msg for _, _, msg in notes)
    # RLinf's tracer spelling inside our own block, too
    cfg = load_config({"integrated": {"profile": False}, "tracer": {"enable": True, "output_file": str(tmp_path / "t.jsonl")}})
    assert cfg.tracer.output_dir == str(tmp_path)


def test_profiler_config_wins_over_framework_blocks():
    data = {"profiler_config": {"tracer": {"enable": False}}, "cluster": {"tracer": {"enable": True}},
            "global_profiler": {"tool": "npu", "steps": [1]}}
    with collect_notes() as notes:
        cfg = load_config(data)
    assert not cfg.tracer.enable and not cfg.integrated.profile
    assert sorted(where for _, where, _ in notes) == ["cluster.tracer", "global_profiler"]


def test_notes_are_logged_when_not_collected(caplog):
    with caplog.at_level(logging.WARNING, logger="mindspeed_profiler.config"):
        load_config(VERL_TRAINER)
    assert "verl config: global_profiler: profiling off: global_profiler.tool is null" in caplog.text


# --------------------------------------------------------------------------------------------
# MindSpeed-RL's key spelling and declared stages
# --------------------------------------------------------------------------------------------


def test_hyphenated_keys_read_as_mindspeed_rl_does():
    cfg = load_config({"profiler_config": {"integrated": {"profile": True, "profile-ranks": [0, 1], "profile-step-end": 3}}})
    assert cfg.integrated.profile_ranks == (0, 1) and cfg.integrated.profile_step_end == 3
    assert load_config({"profile-ranks": [2]}).integrated.profile_ranks == (2,)   # a bare section
    assert load_config(None, ["integrated.profile-level=level2"]).integrated.profile_level == "level2"
    with pytest.raises(ProfilerConfigError, match=r"integrated.profile_ranks: is given twice, as 'profile-ranks' and 'profile_ranks'"):
        load_config({"integrated": {"profile-ranks": [0], "profile_ranks": [1]}})


@pytest.fixture
def fresh_stages():
    with stage_registry.scoped_stages():
        yield


def test_stages_declared_in_yaml(fresh_stages):
    with pytest.raises(ProfilerConfigError, match="unknown stage 'actor_image_embeds'"):
        load_config({"integrated": {"stage": "actor_image_embeds"}})
    cfg = load_config({"integrated": {"stage": ["actor_update", "actor_image_embeds"], "register_stages": ["actor_image_embeds"]}})
    assert cfg.integrated.stages == ("actor_update", "actor_image_embeds")
    assert cfg.integrated.register_stages == ("actor_image_embeds",)
    # where MindSpeed-RL's own loader (which reads only profiler_config.integrated) never looks
    cfg = load_config({"profiler_config": {"register_stages": ["vision_encode"], "integrated": {"stage": "vision_encode"}}})
    assert cfg.integrated.register_stages == ("vision_encode",)
    assert load_config(cfg).integrated.stage == "vision_encode"   # round trip through to_dict
    with pytest.raises(ProfilerConfigError, match=r"register_stages: stage name 'all' is not allowed"):
        load_config({"integrated": {"register_stages": ["all"]}})


def test_stages_declared_on_the_command_line(fresh_stages, tmp_path, capsys):
    path = tmp_path / "train.yaml"
    path.write_text(yaml.safe_dump({"profiler_config": {"integrated": {"stage": "actor_image_embeds"}}}))
    assert cli_main(["check-config", str(path), "--no-path-check"]) == 2
    assert "unknown stage 'actor_image_embeds'" in capsys.readouterr().err
    assert cli_main(["check-config", str(path), "--stage", "actor_image_embeds", "--stage", "critic_embeds"]) == 0
    assert "stage: actor_image_embeds" in capsys.readouterr().out
    assert cli_main(["check-config", str(path), "--stage", "bad name"]) == 2
    assert "--stage: stage name 'bad name' is not allowed" in capsys.readouterr().err


def test_check_config_prints_notes_and_takes_framework_overrides(capsys):
    code = cli_main(["check-config", str(VERL_TRAINER), "--no-path-check", "global_profiler.tool=npu",
                     "global_profiler.steps=[3]", "actor_rollout_ref.actor.profiler.enable=true", "integrated.profile_level=level2"])
    out, err = capsys.readouterr()
    assert code == 0, err
    cfg = yaml.safe_load(out)["profiler_config"]["integrated"]
    assert cfg["profile"] and cfg["profile_steps"] == [3] and cfg["profile_level"] == "level2"
    assert cfg["role_ranks"] == {"actor": [0], "rollout": [0]}
    assert "note (verl)" not in err   # verl's shipped config, one role on: every key is verl's, mapped exactly
    assert cli_main(["check-config", str(VERL_TRAINER), "global_profiler.steps=[0]", "global_profiler.tool=npu",
                     "actor_rollout_ref.actor.profiler.enable=true"]) == 2
    assert "global_profiler.steps: got [0]" in capsys.readouterr().err


# --------------------------------------------------------------------------------------------
# The schema additions at runtime: per-role ranks, one capture per step
# --------------------------------------------------------------------------------------------


def test_role_ranks_select_per_role(tmp_path, caplog):
    cfg = load_config({"integrated": {"profile": True, "backend": "torch", "profile_save_path": str(tmp_path),
                                      "profile_steps": [1], "role_ranks": {"actor": [0, 1], "rollout": 0}}})
    integ = cfg.integrated
    assert integ.rank_selected(1, "actor") and not integ.rank_selected(1, "rollout") and integ.rank_selected(0, "rollout")
    assert not integ.rank_selected(0, "ref") and integ.rank_selected(7)   # no role: profile_ranks alone
    with caplog.at_level(logging.WARNING, logger="mindspeed_profiler"):
        for role, rank in (("actor", 1), ("rollout", 1), ("ref", 0)):
            train(IntegratedProfiler(integ, role=role, rank=rank, world_size=2), 1)
    names = [p.name for p in tmp_path.rglob("*") if p.is_dir() and p.name.endswith("_pt")]
    assert len(names) == 1 and names[0].startswith("actor_rank1_"), names
    assert "role 'ref' is not in integrated.role_ranks (actor, rollout)" in caplog.text


def test_role_ranks_in_the_mindspeed_rl_functions(monkeypatch):
    from mindspeed_profiler.integrations.mindspeed_rl import get_grpo_profiler

    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    block = {"profile": True, "backend": "torch", "role_ranks": {"actor": [1], "ref": [0]}}
    assert get_grpo_profiler(block, role="actor") is not None
    assert get_grpo_profiler(block, role="ref") is None        # rank 1 is not one of ref's
    assert get_grpo_profiler(block, role="critic") is None     # a role not listed


def test_role_ranks_errors():
    with pytest.raises(ProfilerConfigError) as err:
        load_config({"integrated": {"role_ranks": {"actor": "0,1", "bad role": [0]}}})
    assert [p for p, _ in err.value.problems] == ["profiler_config.integrated.role_ranks.actor",
                                                  "profiler_config.integrated.role_ranks.bad role"]
    with pytest.raises(ProfilerConfigError, match=r"role_ranks: got \[0\] \(list\); expected a mapping of role name to ranks"):
        load_config({"integrated": {"role_ranks": [0]}})


def test_one_capture_per_listed_step(tmp_path):
    def run(continuous: bool) -> list[tuple[int, int]]:
        out = tmp_path / str(continuous)
        cfg = load_config({"integrated": {"profile": True, "backend": "torch", "profile_save_path": str(out),
                                          "profile_steps": [2, 3, 5], "profile_steps_continuous": continuous}})
        prof = IntegratedProfiler(cfg, role="actor", rank=0, world_size=1)
        train(prof, 6)
        return sorted((c["steps"][0], c["steps"][-1]) for c in prof.captures)

    assert run(True) == [(2, 3), (5, 5)]
    assert run(False) == [(2, 2), (3, 3), (5, 5)]


# --------------------------------------------------------------------------------------------
# The docs keep up
# --------------------------------------------------------------------------------------------


def test_migrating_doc_maps_every_field():
    """migrating.md and the page of each framework (verl.md, rlinf.md, mindspeed_rl.md) name every key read."""
    from mindspeed_profiler.config.dialects import rlinf as R, verl as V, verl_schema as S
    from mindspeed_profiler.config import MINDSPEED_FIELDS

    docs = Path(__file__).parents[1] / "docs"
    doc = "\n".join((docs / page).read_text(encoding="utf-8")
                    for page in ("migrating.md", "verl.md", "rlinf.md", "mindspeed_rl.md"))
    names = set(MINDSPEED_FIELDS) | set(S.VERL_GLOBAL_KEYS) | set(S.VERL_ROLE_KEYS) | set(R.RLINF_TRACER_KEYS) \
        | set(R.RLINF_PROFILING_KEYS) | {k for keys in S.VERL_TOOL_KEYS.values() for k in keys if k != "name"} \
        | {c for contents in S.VERL_CONTENTS.values() for c in contents} | set(S.VERL_SCHEDULE_KEYS) - {"name"} \
        | {k for keys in S.VERL_GLOBAL_TOOL_KEYS.values() for k in keys} | set(S.VERL_TOOLS) \
        | set(V.VERL_ROLE_PATHS.values()) | {f for stages in V.VERL_STAGES.values() for f in stages}
    missing = sorted(n for n in names if not re.search(rf"[`. /]{re.escape(n)}[`. /:]", doc))
    assert missing == []


def test_data_readme_lists_every_dialect_file():
    readme = (DATA.parent / "README.md").read_text(encoding="utf-8")
    missing = [str(p.relative_to(DATA)) for p in DATA.rglob("*") if p.is_file() and p.name not in readme]
    assert missing == []


def test_a_hydra_dictconfig_of_verl_is_read_the_same():
    omegaconf = pytest.importorskip("omegaconf")
    composed = omegaconf.OmegaConf.load(VERL_TRAINER)
    composed.global_profiler.tool = "torch"
    composed.global_profiler.steps = [2, 3]
    composed.global_profiler.profile_continuous_steps = True
    composed.actor_rollout_ref.actor.profiler.enable = True
    composed.actor_rollout_ref.actor.profiler.all_ranks = True
    integ = load_config(composed, check_paths=False).integrated
    assert integ.profile and integ.backend == "torch" and integ.profile_steps == (2, 3) and integ.profile_steps_continuous
    assert dict(integ.role_ranks) == {"actor": "all", "rollout": "all"}   # the rollout follows the actor (interpolated)
