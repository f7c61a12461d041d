"""Review findings: inputs that escaped validation or got an unclear error."""
from __future__ import annotations

import pytest

from mindspeed_profiler import load_config
from mindspeed_profiler.config import ProfilerConfigError


def problems(source, overrides=()):
    with pytest.raises(ProfilerConfigError) as e:
        load_config(source, overrides, check_paths=False)
    return e.value.problems


# --- OmegaConf / Hydra sources -----------------------------------------------------------------

def test_omegaconf_unrelated_interpolation_does_not_break_loading():
    # only profiler_config is resolved: a Hydra resolver elsewhere (e.g. ${now:...}, not registered
    # outside a Hydra app) or a dangling interpolation in another section is none of our business
    from omegaconf import OmegaConf

    cfg = OmegaConf.create({"run_dir": "outputs/${now:%H-%M}", "other": "${nope}",
                            "profiler_config": {"integrated": {"profile": True}}})
    assert load_config(cfg, check_paths=False).integrated.profile is True


def test_omegaconf_interpolation_inside_block_still_resolves_against_the_root():
    from omegaconf import OmegaConf

    cfg = OmegaConf.create({"iters": 3, "profiler_config": {"integrated": {"profile_step_start": "${iters}",
                                                                          "profile_step_end": 5}}})
    assert load_config(cfg, check_paths=False).integrated.steps == (3, 4)


def test_omegaconf_broken_interpolation_in_block_is_a_config_error():
    from omegaconf import OmegaConf

    cfg = OmegaConf.create({"profiler_config": {"integrated": {"profile_step_start": "${nope}"}}})
    (path, msg), = problems(cfg)
    assert path == "profiler_config.integrated.profile_step_start" and "nope" in msg


def test_omegaconf_missing_value_named_as_such():
    from omegaconf import OmegaConf

    cfg = OmegaConf.create({"profiler_config": {"integrated": {"profile": "???", "profile_ranks": "???"}}})
    found = dict(problems(cfg))
    assert set(found) == {"profiler_config.integrated.profile", "profiler_config.integrated.profile_ranks"}
    assert all("missing" in m and "???" in m for m in found.values())
    # an override fills a missing value, as in Hydra
    assert load_config(cfg, ["integrated.profile=true", "integrated.profile_ranks=[0]"], check_paths=False).integrated.profile


# --- typos at the top level must not silently turn profiling off -------------------------------

def test_misspelled_root_key_is_an_error_not_profiling_off():
    (path, msg), = problems({"profiler_confg": {"integrated": {"profile": True}}, "megatron_training": {}})
    assert path == "profiler_confg" and "profiler_config" in msg


def test_bare_section_with_a_typo_is_reported():
    (path, msg), = problems({"profle": True})
    assert path == "profiler_config.integrated.profle" and "'profile'" in msg
    found = dict(problems({"profile_ranks": [0], "profle": True}))
    assert "profiler_config.integrated.profle" in found


def test_training_yaml_without_block_still_means_off():
    assert load_config({"megatron_training": {"stage": "ray_grpo"}, "rl_config": {}, "actor_config": {}}) == load_config(None)


# --- enums: case-insensitive everywhere, as docs/config.md says --------------------------------

@pytest.mark.parametrize("section,key,given,want", [
    ("integrated", "backend", "NPU", "npu"),
    ("integrated", "aic_metrics", "pipeutilization", "PipeUtilization"),
    ("integrated", "stage", "ALL", "all"),
    ("integrated", "profile_ranks", "All", "all"),
    ("tracer", "sink", "File", "file"),
    ("system", "backend", "Nsight", "nsight"),
])
def test_enum_values_case_insensitive(section, key, given, want):
    cfg = load_config({section: {key: given}}, check_paths=False)
    assert getattr(getattr(cfg, section), key) == want


def test_non_finite_numbers_rejected():
    found = dict(problems({"integrated": {"trace_size_budget_mb": float("inf")}, "tracer": {"flush_interval_s": float("inf")}}))
    assert set(found) == {"profiler_config.integrated.trace_size_budget_mb", "profiler_config.tracer.flush_interval_s"}


def test_check_config_usage_does_not_call_overrides_required(capsys):
    from mindspeed_profiler.cli import main

    with pytest.raises(SystemExit):
        main(["check-config"])
    err = capsys.readouterr().err
    assert "file" in err and "OVERRIDE" not in err.split("required:")[-1]


def test_version_flag(capsys):
    from mindspeed_profiler import __version__
    from mindspeed_profiler.cli import main

    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0 and __version__ in capsys.readouterr().out
