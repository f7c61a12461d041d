"""`load_config` and `mindspeed-profiler check-config` accept and refuse the same inputs: the CLI
calls the library's one loading entry point, overrides included (in a verl or RLinf YAML, those
written in its own keys apply to its YAML). Table-driven over the dialect files in tests/data,
with overrides in each dialect's own keys; an accepted config prints exactly what load_config
returns, a refused one the same problems."""
from __future__ import annotations

from pathlib import Path

import pytest

from mindspeed_profiler import ProfilerConfigError, load_config
from mindspeed_profiler.cli import main

DATA = Path(__file__).parent / "data"
D = DATA / "dialects"
MSRL = D / "mindspeed_rl" / "2.3.0" / "test_grpo_trainer_qwen25_7b_integrated.yaml"
MSRL_MASTER = D / "mindspeed_rl" / "master" / "test_ppo_trainer_qwen25_7b_integrated.yaml"
VERL = D / "verl" / "config" / "_generated_ppo_trainer.yaml"
VERL_MEGATRON = D / "verl" / "config" / "_generated_ppo_megatron_trainer.yaml"
VERL_PROFILER = D / "verl" / "config" / "profiler.yaml"
RLINF_PRESET = D / "rlinf" / "profile" / "default.yaml"
RLINF_E2E = D / "rlinf" / "e2e" / "libero_spatial_ppo_openpi.yaml"

CASES = [  # (file, overrides, accepted)
    (MSRL, [], True),
    (MSRL, ["profiler_config.integrated.profile=true", "integrated.stage=actor_update"], True),
    (MSRL, ["integrated.stage=actor_updat"], False),                        # a typo, with a hint
    (MSRL, ["integrated.profile_step_start=3", "integrated.profile_step_end=3"], False),
    (MSRL_MASTER, ["profiler_config.integrated.profile_ranks=[0,1]"], True),
    (MSRL_MASTER, ["integrated.profile_ranks=0,1"], False),
    # the example: load_config used to say "unknown section" here while check-config accepted it
    (VERL, ["global_profiler.tool=npu", "global_profiler.steps=[1,2]"], True),
    (VERL, ["+global_profiler.tool=torch", "global_profiler.steps=[2]", "integrated.warmup_steps=1"], True),
    (VERL, ["global_profiler.tool=npu", "global_profiler.steps=[1,2]", "actor_rollout_ref.actor.profiler.enable=true",
            "actor_rollout_ref.actor.profiler.ranks=[0]"], True),
    (VERL, ["global_profiler.tool=nsys", "global_profiler.steps=[1]"], True),
    (VERL, ["global_profiler.tool=bogus"], False),
    (VERL, ["global_profiler.tool=npu", "global_profiler.steps=[0]"], False),   # verl's steps are 1-based
    (VERL_MEGATRON, ["global_profiler.tool=torch_memory", "global_profiler.steps=[3]"], True),
    (VERL_PROFILER, [], True),
    (RLINF_PRESET, [], True),
    (RLINF_PRESET, ["enabled=false"], True),
    (RLINF_PRESET, ["steps=[-1]"], False),
    (RLINF_E2E, ["cluster.tracer.enable=false"], True),
    (RLINF_E2E, ["+cluster.profiling.backend=py_spy", "+cluster.profiling.worker_groups=[ActorGroup]"], True),
    (RLINF_E2E, ["cluster.tracer.enable=maybe"], False),
    (MSRL, ["integrated.stage"], False),                                      # no '='
]


def _cli(path: Path, overrides: list[str], capsys) -> tuple[int, str, set[str]]:
    code = main(["check-config", str(path), "--no-path-check", *overrides])
    out, err = capsys.readouterr()
    problems = {line.strip() for line in err.splitlines() if line.startswith("  ")}
    return code, out, problems


@pytest.mark.parametrize("path,overrides,accepted", CASES,
                         ids=[f"{p.parent.name}/{p.name} {' '.join(o)}" for p, o, _ in CASES])
def test_load_config_and_check_config_agree(path, overrides, accepted, capsys):
    try:
        cfg, problems = load_config(path, overrides, check_paths=False), None
    except ProfilerConfigError as exc:
        cfg, problems = None, {f"{where}: {msg}" for where, msg in exc.problems}
    code, out, cli_problems = _cli(path, overrides, capsys)
    assert (cfg is not None) is accepted, problems
    if accepted:
        assert code == 0 and out == cfg.to_yaml()
    else:
        assert code == 2 and cli_problems == problems


def test_a_verl_override_in_its_own_keys_reaches_the_translation():
    cfg = load_config(VERL, ["global_profiler.tool=npu", "global_profiler.steps=[1,2]",
                             "actor_rollout_ref.actor.profiler.enable=true"], check_paths=False)
    assert cfg.integrated.profile and cfg.integrated.backend == "npu" and cfg.integrated.steps == (1, 2)
    # without a role enabled verl profiles nothing: the same file, read as verl reads it
    assert not load_config(VERL, ["global_profiler.tool=npu", "global_profiler.steps=[1,2]"], check_paths=False).integrated.profile
