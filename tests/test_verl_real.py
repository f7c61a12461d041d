"""verl 0.9.1 as it ships, and verl's own verdict as the oracle.

- The fast part reads verl 0.9.1's shipped profiler YAML (copies in tests/data/dialects/verl/0.9.1/,
  taken from the wheel unchanged) and checks what the issue found drifted: the shipped trainer
  config loaded with each tool gives no "not a verl setting" note for a key verl has, a bare
  `global_profiler` or role `profiler` block is recognised as verl's, the torch tool's schedule
  and the token window are read, and the key lists in verl_schema.py are the YAML's. Then the
  accept / reject TABLE: each row is verl's shipped config with Hydra overrides, as verl's launch
  scripts write them, and verl's verdict on it (recorded); load_config must give the same verdict.
- The slow part runs verl itself (tests/verl_oracle.py in `.venv-verl`, made by `./run test`):
  every recorded verdict must be verl's, the recorded key lists must be the fields of verl's
  config classes and its shipped YAML's keys, and the copies must be the installed files. A new
  verl release fails here first. Without `.venv-verl` these skip, saying why (a failure under
  MSP_REQUIRE_FRAMEWORKS=1, as CI runs).
"""
from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from conftest import REPO_ROOT
from frameworks import framework_python, run_json
from mindspeed_profiler.config import load_config
from mindspeed_profiler.config.dialects import collect_notes, detect
from mindspeed_profiler.config.dialects import verl_schema as S
from mindspeed_profiler.config.errors import ProfilerConfigError

V091 = REPO_ROOT / "tests" / "data" / "dialects" / "verl" / "0.9.1"
TRAINER = V091 / "_generated_ppo_trainer.yaml"
ORACLE = REPO_ROOT / "tests" / "verl_oracle.py"

A, R, F, C, G = ("actor_rollout_ref.actor.profiler", "actor_rollout_ref.rollout.profiler", "actor_rollout_ref.ref.profiler",
                 "critic.profiler", "global_profiler")


def on(tool: str, *more: str, steps: str = "[1]", role: str = A) -> list[str]:
    return [f"{G}.tool={tool}", f"{G}.steps={steps}", f"{role}.enable=true", *more]


# (id, Hydra overrides onto verl's shipped ppo_trainer config, verl 0.9.1's verdict: accepted?)
TABLE: list[tuple[str, list[str], bool]] = [
    ("shipped", [], True),
    ("torch", on("torch", steps="[1,2]"), True),
    ("npu_all_ranks", on("npu", f"{A}.all_ranks=true"), True),
    ("nsys", on("nsys", steps="[1,3]"), True),
    ("torch_memory", on("torch_memory", steps="[2]"), True),
    ("npu_discrete_level1", on("npu", f"{A}.tool_config.npu.discrete=true", f"{A}.tool_config.npu.level=level1",
                               f"{A}.tool_config.npu.contents=[npu,cpu,memory]"), True),
    ("torch_contents", on("torch", f"{A}.tool_config.torch.contents=[cuda,shapes,stack]"), True),
    ("torch_schedule", on("torch", f"{A}.tool_config.torch.schedule.active=2", f"{A}.tool_config.torch.schedule.wait=1"), True),
    ("torch_token_window", on("torch", f"{R}.tool_config.torch.profile_token_start=0",
                              f"{R}.tool_config.torch.profile_token_end=64", role=R), True),
    ("npu_token_window", on("npu", f"{R}.tool_config.npu.profile_token_start=8", f"{R}.tool_config.npu.profile_token_end=16",
                            role=R), True),
    ("relocate_and_hook", on("torch", f"{G}.relocate_results=true", f"{G}.finish_hook_cmd='echo done'",
                             f"{G}.finish_hook_ranks=[0]"), True),
    ("memory_snapshot_steps", on("torch_memory", f"{G}.global_tool_config.torch_memory.memory_snapshot_num_steps=2"), True),
    ("precision_debugger", on("precision_debugger"), True),
    ("continuous_steps", on("npu", f"{G}.profile_continuous_steps=true", steps="[1,2,3]"), True),
    ("critic_ranks", on("torch", f"{C}.ranks=[0,1]", role=C), True),
    ("three_roles_discrete", on("torch", f"{R}.enable=true", f"{F}.enable=true",
                                *(f"{x}.tool_config.torch.discrete=true" for x in (A, R, F))), True),
    ("steps_null", [f"{G}.tool=torch", f"{A}.enable=true"], True),
    ("steps_empty", on("torch", steps="[]"), True),
    ("save_path", on("npu", f"{G}.save_path=/tmp/prof"), True),
    ("critic_level_none", on("npu", f"{C}.tool_config.npu.level=level_none", role=C), True),
    ("all_ranks_yes", on("torch", f"{A}.all_ranks=yes"), True),            # OmegaConf reads yes as true
    ("ranks_strings", on("torch", f"{A}.ranks=['0','1']"), True),          # ... and '0' as 0 in a list[int]
    # refused by verl
    ("hook_cmd_bool", on("npu", f"{G}.finish_hook_cmd=true", f"{G}.finish_hook_all_ranks=true"), False),
    ("torch_contents_gpu", on("torch", f"{A}.tool_config.torch.contents=[gpu]"), False),
    ("npu_level9", on("npu", f"{A}.tool_config.npu.level=level9"), False),
    ("npu_contents_disk", on("npu", f"{A}.tool_config.npu.contents=[disk]"), False),
    ("token_end_before_start", on("torch", f"{R}.tool_config.torch.profile_token_start=10",
                                  f"{R}.tool_config.torch.profile_token_end=5", role=R), False),
    ("token_start_negative", on("torch", f"++{A}.tool_config.torch.profile_token_start=-1"), False),
    ("npu_token_empty", on("npu", f"++{A}.tool_config.npu.profile_token_start=4", f"++{A}.tool_config.npu.profile_token_end=4"),
     False),
    ("schedule_negative", on("torch", f"{A}.tool_config.torch.schedule.active=-1"), False),
    ("schedule_string", on("torch", f"{A}.tool_config.torch.schedule.active=two"), False),
    ("alloc_entries_zero", on("torch_memory", f"{A}.tool_config.torch_memory.trace_alloc_max_entries=0"), False),
    ("stack_depth_zero", on("torch_memory", f"{G}.global_tool_config.torch_memory.stack_depth=0"), False),
    ("snapshot_steps_zero", on("torch_memory", f"{G}.global_tool_config.torch_memory.memory_snapshot_num_steps=0"), False),
    ("role_key_typo", on("torch", f"+{A}.enabled=true"), False),
    ("role_unknown_key", on("torch", f"+{A}.color=red"), False),
    ("ranks_as_string", on("torch", f"{A}.ranks='0,1'"), False),
    ("torch_step_start_removed", on("torch", f"+{A}.tool_config.torch.step_start=1"), False),   # verl < 0.9's key
    ("npu_unknown_key", on("npu", f"+{A}.tool_config.npu.foo=1"), False),
    ("steps_int", on("torch", steps="5"), False),
    ("enable_maybe", [f"{G}.tool=torch", f"{G}.steps=[1]", f"{A}.enable=maybe"], False),
    ("disabled_role_bad_contents", [f"{G}.tool=torch", f"{G}.steps=[1]", f"{C}.enable=true",
                                    f"{A}.tool_config.torch.contents=[gpu]"], False),
    ("tool_off_bad_contents", [f"{A}.tool_config.torch.contents=[gpu]"], False),   # verl converts every role block
    ("hook_cmd_list", on("torch", f"{A}.finish_hook_cmd=[a,b]"), False),
    ("hook_ranks_string", on("torch", f"{G}.finish_hook_ranks='0'"), False),
]
# Where verl accepts a config and quietly profiles nothing, and we refuse it on purpose
# (docs/verl.md, "Stricter than verl"): verl's verdict is checked all the same.
STRICTER: list[tuple[str, list[str], str]] = [
    ("tool_typo", on("nsight"), r"global_profiler.tool: got 'nsight'"),                        # verl: a no-op profiler
    ("step_zero", on("torch", steps="[0,1]"), r"global_profiler.steps: got \[0, 1\]"),         # verl's steps count from 1
    ("global_typo", on("torch", f"++{G}.stpes=[1]"), r"did you mean 'steps'"),                # verl never reads it
]


@pytest.fixture(scope="module")
def shipped() -> dict:
    return yaml.safe_load(TRAINER.read_text(encoding="utf-8"))


def _ours(shipped: dict, overrides: list[str]) -> tuple[bool, str, list]:
    """(accepted, the error, the notes); a refusal names only keys in verl's profiler blocks."""
    with collect_notes() as notes:
        try:
            load_config(copy.deepcopy(shipped), overrides, check_paths=False)
            return True, "", notes
        except ProfilerConfigError as exc:
            assert all(path.startswith((G, A, R, F, C)) for path, _ in exc.problems), exc.problems
            return False, str(exc), notes


def test_the_table_is_big_enough_and_both_ways():
    assert len(TABLE) >= 30 and len({t[0] for t in TABLE}) == len(TABLE)
    assert sum(ok for *_, ok in TABLE) >= 15 and sum(not ok for *_, ok in TABLE) >= 15


@pytest.mark.parametrize("case", TABLE, ids=[t[0] for t in TABLE])
def test_we_accept_what_verl_accepts_and_refuse_what_it_refuses(shipped, case):
    name, overrides, verl_accepts = case
    ours, error, _ = _ours(shipped, overrides)
    assert ours == verl_accepts, f"{name}: verl {'accepts' if verl_accepts else 'refuses'} it, we {error or 'accept it'}"


@pytest.mark.parametrize("case", STRICTER, ids=[t[0] for t in STRICTER])
def test_where_we_are_stricter_than_verl_we_say_why(shipped, case):
    _, overrides, message = case
    with pytest.raises(ProfilerConfigError, match=message):
        load_config(copy.deepcopy(shipped), overrides, check_paths=False)


# ------------------------------------------------------------------ what drifted (each failed on the code before)


@pytest.mark.parametrize("tool", ["nsys", "npu", "torch", "torch_memory"])
def test_shipped_config_with_each_tool_has_no_note_for_a_key_verl_has(shipped, tool):
    overrides = on(tool, f"{R}.enable=true", f"{F}.enable=true", f"{C}.enable=true")
    ours, error, notes = _ours(shipped, overrides)
    assert ours, error
    ignored = [(where, what) for _, where, what in notes if "not a verl" in what or "ignored" in what]
    assert ignored == []
    # nothing is said about a key left at the value verl ships
    quiet = ("relocate_results", "finish_hook", ".schedule", "profile_token", "memory_snapshot_num_steps", ".ranks:")
    assert [w for _, w, what in notes if any(q in w for q in quiet) and tool != "nsys"] == []


def test_a_bare_091_global_profiler_block_and_role_profiler_file_are_verls(shipped):
    assert detect(shipped["global_profiler"]).dialect == "verl"
    assert detect(shipped["global_profiler"]).shape == "global"
    role = yaml.safe_load((V091 / "profiler.yaml").read_text(encoding="utf-8"))
    assert detect(role).dialect == "verl" and detect(role).shape == "role"
    with collect_notes() as notes:
        cfg = load_config(V091 / "profiler.yaml", ["enable=true", "tool_config.torch.contents=[cuda,stack]"], check_paths=False)
    assert cfg.integrated.profile is False     # a role block alone has no steps: verl profiles nothing
    assert any("global_profiler.steps is None" in what for _, _, what in notes)
    with collect_notes() as notes:
        bare = load_config({"global_profiler": {**shipped["global_profiler"], "tool": "torch", "steps": [2]},
                            "actor_rollout_ref": {"actor": {"profiler": {**role, "enable": True, "tool": "torch"}}}},
                           check_paths=False).integrated
    assert bare.profile and bare.backend == "torch" and bare.steps == (2,)
    assert not [n for n in notes if "not a verl" in n[2]]


def test_torch_schedule_token_window_and_snapshot_steps_are_read_not_ignored(shipped):
    _, _, notes = _ours(shipped, on("torch", f"{A}.tool_config.torch.schedule.active=2",
                                    f"{R}.enable=true", f"{R}.tool_config.torch.profile_token_end=32"))
    said = {where: what for _, where, what in notes}
    assert "active=2" in said[f"{A}.tool_config.torch.schedule"]
    assert "attach_engine(..., num_steps=32)" in said[f"{R}.tool_config.torch.profile_token_end"]
    _, _, notes = _ours(shipped, on("torch_memory", f"{G}.global_tool_config.torch_memory.memory_snapshot_num_steps=3"))
    assert any("memory_snapshot_num_steps=3" in what for _, _, what in notes)


def test_npu_contents_are_read_as_verl_091_reads_them(shipped):
    """verl 0.9.1 always records CPU activity; npu `[]` is CPU only, torch `[]` CPU and CUDA."""
    npu = load_config(copy.deepcopy(shipped), on("npu"), check_paths=False).integrated
    assert (npu.profile_with_cpu, npu.profile_with_npu, npu.profile_with_memory, npu.profile_with_stack) == (True, False, False, False)
    torch_ = load_config(copy.deepcopy(shipped), on("torch", f"{A}.tool_config.torch.contents=[memory]"),
                         check_paths=False).integrated
    assert (torch_.profile_with_cpu, torch_.profile_with_npu, torch_.profile_with_memory) == (True, False, True)
    torch_all = load_config(copy.deepcopy(shipped), on("torch"), check_paths=False).integrated
    assert (torch_all.profile_with_cpu, torch_all.profile_with_npu) == (True, True)


def test_recorded_key_lists_are_the_shipped_yamls(shipped):
    gp = shipped["global_profiler"]
    assert list(gp) == list(S.VERL_GLOBAL_KEYS)
    assert {k: list(v) for k, v in gp["global_tool_config"].items()} == {k: list(v) for k, v in S.VERL_GLOBAL_TOOL_KEYS.items()}
    role = yaml.safe_load((V091 / "profiler.yaml").read_text(encoding="utf-8"))
    assert set(role) | {"global_tool_config"} == set(S.VERL_ROLE_KEYS)
    for tool, block in role["tool_config"].items():
        assert set(block) - {"strict"} <= set(S.VERL_TOOL_KEYS[tool]), tool
    assert set(role["tool_config"]["torch"]["schedule"]) <= set(S.VERL_SCHEDULE_KEYS)
    assert "step_start" not in S.VERL_TOOL_KEYS["torch"] and "memory_snapshot_num_steps" in S.VERL_TOOL_KEYS["torch_memory"]


# ------------------------------------------------------------------ against the installed verl (slow)


@pytest.fixture(scope="module")
def verl_says() -> dict:
    python = framework_python("verl")
    cases = [{"id": n, "overrides": o} for n, o, _ in TABLE] + [{"id": f"stricter:{n}", "overrides": o} for n, o, _ in STRICTER]
    return run_json(python, ORACLE, {"cases": cases}, timeout=600)


@pytest.mark.slow
def test_recorded_verdicts_are_verls_own(verl_says, shipped):
    assert verl_says["verl"] == S.VERL_RELEASE
    got = {r["id"]: r for r in verl_says["results"]}
    wrong = [(n, ok, got[n]["error"]) for n, _, ok in TABLE if got[n]["accepted"] != ok]
    assert wrong == []
    assert not [r for r in verl_says["results"] if (r["error"] or "").startswith("override:")]   # Hydra took every override
    assert all(got[f"stricter:{n}"]["accepted"] for n, _, _ in STRICTER)   # verl takes these quietly
    # and ours agrees with verl's verdict directly (not only with the recording)
    assert [n for n, o, _ in TABLE if _ours(shipped, o)[0] != got[n]["accepted"]] == []


@pytest.mark.slow
def test_recorded_key_lists_are_verls_classes_and_yaml(verl_says):
    keys = verl_says["keys"]
    classes = keys["classes"]
    assert set(classes["ProfilerConfig"]) == set(S.VERL_ROLE_KEYS)
    tool_classes = {"npu": "NPUToolConfig", "nsys": "NsightToolConfig", "torch": "TorchProfilerToolConfig",
                    "torch_memory": "TorchMemoryToolConfig", "precision_debugger": "PrecisionDebuggerToolConfig"}
    assert {t: set(classes[c]) for t, c in tool_classes.items()} == {t: set(k) for t, k in S.VERL_TOOL_KEYS.items()}
    assert set(classes["TorchProfilerScheduleConfig"]) == set(S.VERL_SCHEDULE_KEYS)
    assert keys["global_profiler"] == list(S.VERL_GLOBAL_KEYS)
    assert {k: list(v) for k, v in keys["global_tool_config"].items()} == {k: list(v) for k, v in S.VERL_GLOBAL_TOOL_KEYS.items()}
    assert set(keys["role_tool_config"]) == set(S.VERL_TOOLS)


@pytest.mark.slow
def test_the_copies_are_the_installed_files(verl_says):
    for name, path in verl_says["keys"]["files"].items():
        assert (V091 / Path(name).name).read_bytes() == Path(path).read_bytes(), name
    assert verl_says["generated_is_composed"]
