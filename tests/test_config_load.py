"""Loading profiler_config from YAML files, dicts, OmegaConf, whole training YAMLs and overrides."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml

from conftest import REPO_ROOT
from mindspeed_profiler import load_config
from mindspeed_profiler.config import (
    MINDSPEED_FIELDS,
    IntegratedConfig,
    ProfilerConfig,
    ProfilerConfigError,
)

DATA = Path(__file__).parent / "data"
PRESETS = REPO_ROOT / "configs" / "profiler_config"


def test_mindspeed_rl_training_yaml_loads_unchanged(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = load_config(DATA / "mindspeed_rl_grpo_integrated.yaml")
    i = cfg.integrated
    assert (i.profile, i.mstx, i.stage) == (True, False, "actor_update")
    assert i.profile_save_path == "./profiler_data"
    assert i.profile_export_type == "db"
    assert (i.profile_step_start, i.profile_step_end) == (1, 2)
    assert i.profile_level == "level1"
    assert (i.profile_with_memory, i.profile_record_shapes) == (False, False)
    assert (i.profile_with_cpu, i.profile_with_npu, i.profile_with_module) == (True, True, False)
    assert i.profile_analysis is True
    assert i.profile_ranks == (0, 1)
    assert i.stages == ("actor_update",) and i.steps == (1,)
    assert i.rank_selected(1) and not i.rank_selected(2)
    # our additions keep their MindSpeed-compatible defaults
    assert i.backend == "auto" and i.profile_steps is None and i.warmup_steps == 0
    assert cfg.system is None and cfg.tracer.enable is False
    # loading creates nothing
    assert list(tmp_path.iterdir()) == []


def test_mindspeed_defaults_match_the_seed():
    i = IntegratedConfig()
    assert MINDSPEED_FIELDS == (
        "profile", "mstx", "stage", "profile_save_path", "profile_export_type", "profile_step_start",
        "profile_step_end", "profile_level", "profile_with_memory", "profile_record_shapes",
        "profile_with_cpu", "profile_with_npu", "profile_with_module", "profile_analysis", "profile_ranks",
    )
    expected = dict(profile=False, mstx=False, stage="all", profile_save_path="./profiler_data",
                    profile_export_type="text", profile_step_start=1, profile_step_end=2,
                    profile_level="level0", profile_with_memory=False, profile_record_shapes=False,
                    profile_with_cpu=True, profile_with_npu=True, profile_with_module=False,
                    profile_analysis=False, profile_ranks="all")
    assert {k: getattr(i, k) for k in MINDSPEED_FIELDS} == expected


@pytest.mark.parametrize("preset", sorted(p.name for p in PRESETS.glob("*.yaml")))
def test_every_preset_loads(preset):
    cfg = load_config(PRESETS / preset)
    assert isinstance(cfg, ProfilerConfig)
    text = (PRESETS / preset).read_text()
    assert text.startswith("#"), "each preset is documented in a header comment"


def test_required_presets_exist():
    names = {p.stem for p in PRESETS.glob("*.yaml")}
    assert {"default", "lightweight_mstx", "actor_update", "all_stages", "dpo", "nsight", "rocprof_sys", "msprof",
            "py_spy", "tracer"} <= names


def test_preset_values():
    light = load_config(PRESETS / "lightweight_mstx.yaml").integrated
    assert (light.profile, light.mstx, light.profile_level, light.profile_with_cpu, light.profile_with_npu) == (
        True, True, "level_none", False, True)
    nsight = load_config(PRESETS / "nsight.yaml").system
    # RLinf's nsys options, switched on, for the groups of this project's trainers
    assert nsight.backend == "nsight" and nsight.enabled is True
    assert nsight.worker_groups == ("actor", "reference")
    assert dict(nsight.options) == {"t": "cuda,cudnn,cublas,nvtx,osrt", "sample": "process-tree",
                                    "cpuctxsw": "process-tree", "cudabacktrace": "all", "osrt-threshold": "1000"}
    for name, backend in (("rocprof_sys", "rocprof_sys"), ("msprof", "msprof"), ("py_spy", "py_spy")):
        system = load_config(PRESETS / f"{name}.yaml").system
        assert system.backend == backend and system.enabled and system.worker_groups and not system.steps
    dpo = load_config(PRESETS / "dpo.yaml").integrated
    assert dpo.warmup_steps == 1 and dpo.steps == (2,)
    assert load_config(PRESETS / "default.yaml") == load_config(None)


def test_sources_dict_block_bare_section_and_omegaconf():
    block = {"integrated": {"profile": False, "stage": ["actor_generate", "actor_update"]}}
    a = load_config({"profiler_config": block})
    b = load_config(block)
    c = load_config(block["integrated"])  # a bare integrated section
    from omegaconf import OmegaConf

    d = load_config(OmegaConf.create({"profiler_config": block, "rl_config": {"x": 1}}))
    assert a == b == c == d
    assert a.integrated.stage == ("actor_generate", "actor_update")
    assert a.integrated.stage_selected("actor_update") and not a.integrated.stage_selected("critic_update")


def test_training_yaml_without_profiler_config_means_off(tmp_path):
    p = tmp_path / "train.yaml"
    p.write_text(yaml.safe_dump({"megatron_training": {"train_iters": 3}}))
    assert load_config(p) == ProfilerConfig()


def test_overrides(tmp_path):
    cfg = load_config(
        DATA / "mindspeed_rl_grpo_integrated.yaml",
        ["profiler_config.integrated.stage=actor_generate", "integrated.profile_ranks=all",
         "integrated.profile_steps=[5, 3]", "+tracer.enable=true", "tracer.output_dir=" + str(tmp_path / "tl")],
    )
    assert cfg.integrated.stage == "actor_generate"
    assert cfg.integrated.profile_ranks == "all"
    assert cfg.integrated.profile_steps == (3, 5) and cfg.integrated.steps == (3, 5)
    assert cfg.tracer.enable and cfg.timeline_dir == str(tmp_path / "tl")


def test_bad_override_syntax_reported():
    with pytest.raises(ProfilerConfigError) as e:
        load_config(None, ["integrated.profile", "=3"])
    assert len(e.value.problems) == 2


def test_config_is_immutable():
    cfg = load_config({"integrated": {"profile_ranks": [1, 0]}, "system": {"backend": "nsight", "enabled": False,
                                                                           "options": {"t": "cuda"}}})
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.integrated.profile = True  # type: ignore[misc]
    with pytest.raises(TypeError):
        cfg.system.options["t"] = "nvtx"  # type: ignore[index]
    assert cfg.integrated.profile_ranks == (0, 1)


def test_round_trip_through_yaml(tmp_path):
    cfg = load_config(PRESETS / "nsight.yaml", ["integrated.profile_ranks=[3]", "integrated.stage=[actor_update]"])
    p = tmp_path / "normalized.yaml"
    p.write_text(cfg.to_yaml())
    assert load_config(p) == cfg


def test_case_insensitive_enums_normalized():
    cfg = load_config({"integrated": {"profile_level": "Level1", "profile_export_type": "DB"}})
    assert cfg.integrated.profile_level == "level1" and cfg.integrated.profile_export_type == "db"


@pytest.mark.parametrize("section,key,given,want", [
    ("integrated", "backend", "NPU", "npu"),
    ("integrated", "aic_metrics", "pipeutilization", "PipeUtilization"),
    ("integrated", "stage", "ALL", "all"),
    ("integrated", "profile_ranks", "All", "all"),
    ("tracer", "sink", "File", "file"),
    ("system", "backend", "Nsight", "nsight"),
])
def test_enum_values_case_insensitive_in_every_section(section, key, given, want):
    block = {section: {key: given, **({"enabled": False} if section == "system" else {})}}
    cfg = load_config(block, check_paths=False)
    assert getattr(getattr(cfg, section), key) == want


def test_empty_save_path_falls_back_to_default():
    # MindSpeed-RL's own class default for profile_save_path is ""
    assert load_config({"integrated": {"profile_save_path": ""}}).integrated.profile_save_path == "./profiler_data"


def test_registered_stage_is_accepted():
    from mindspeed_profiler import register_stage

    register_stage("reward_compute")
    assert load_config({"integrated": {"stage": "reward_compute"}}).integrated.stage == "reward_compute"
    with pytest.raises(ValueError):
        register_stage("all")


def test_the_optional_prefix_is_not_an_override_level():
    """MAX_OVERRIDE_DEPTH counts the key inside our block: `profiler_config.` is optional."""
    from mindspeed_profiler.config import MAX_OVERRIDE_DEPTH

    deep = ".".join(["integrated"] + ["x"] * (MAX_OVERRIDE_DEPTH - 1))
    for key in (deep, "profiler_config." + deep):   # at the limit: read (and refused as unknown, not as deep)
        with pytest.raises(ProfilerConfigError, match="unknown key"):
            load_config(None, [f"{key}=1"])
    with pytest.raises(ProfilerConfigError, match="dotted parts"):
        load_config(None, [f"profiler_config.{deep}.x=1"])
