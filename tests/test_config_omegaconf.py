"""OmegaConf / Hydra sources: only the profiler_config node is resolved, and its failures are config errors."""
from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from mindspeed_profiler import load_config
from mindspeed_profiler.config import ProfilerConfigError


def problems(source, overrides=()):
    with pytest.raises(ProfilerConfigError) as e:
        load_config(source, overrides, check_paths=False)
    return e.value.problems


def test_unrelated_interpolation_does_not_break_loading():
    # only profiler_config is resolved: a Hydra resolver elsewhere (e.g. ${now:...}, not registered
    # outside a Hydra app) or a dangling interpolation in another section is none of our business
    cfg = OmegaConf.create({"run_dir": "outputs/${now:%H-%M}", "other": "${nope}",
                            "profiler_config": {"integrated": {"profile": True}}})
    assert load_config(cfg, check_paths=False).integrated.profile is True


def test_interpolation_inside_block_still_resolves_against_the_root():
    cfg = OmegaConf.create({"iters": 3, "profiler_config": {"integrated": {"profile_step_start": "${iters}",
                                                                          "profile_step_end": 5}}})
    assert load_config(cfg, check_paths=False).integrated.steps == (3, 4)


def test_broken_interpolation_in_block_is_a_config_error():
    cfg = OmegaConf.create({"profiler_config": {"integrated": {"profile_step_start": "${nope}"}}})
    (path, msg), = problems(cfg)
    assert path == "profiler_config.integrated.profile_step_start" and "nope" in msg


def test_missing_value_named_as_such_and_filled_by_an_override():
    cfg = OmegaConf.create({"profiler_config": {"integrated": {"profile": "???", "profile_ranks": "???"}}})
    found = dict(problems(cfg))
    assert set(found) == {"profiler_config.integrated.profile", "profiler_config.integrated.profile_ranks"}
    assert all("missing" in m and "???" in m for m in found.values())
    # an override fills a missing value, as in Hydra
    assert load_config(cfg, ["integrated.profile=true", "integrated.profile_ranks=[0]"], check_paths=False).integrated.profile
