"""Finding the profiler_config block in a training YAML: a typo must not silently turn profiling off."""
from __future__ import annotations

import pytest

from mindspeed_profiler import load_config
from mindspeed_profiler.config import ProfilerConfigError


def problems(source):
    with pytest.raises(ProfilerConfigError) as e:
        load_config(source, check_paths=False)
    return e.value.problems


def test_misspelled_root_key_is_an_error_not_profiling_off():
    (path, msg), = problems({"profiler_confg": {"integrated": {"profile": True}}, "megatron_training": {}})
    assert path == "profiler_confg" and "profiler_config" in msg


def test_bare_section_with_a_typo_is_reported():
    (path, msg), = problems({"profle": True})
    assert path == "profiler_config.integrated.profle" and "'profile'" in msg
    found = dict(problems({"profile_ranks": [0], "profle": True}))
    assert "profiler_config.integrated.profle" in found


def test_training_yaml_without_block_still_means_off():
    # MindSpeed-RL's own top-level keys are not mistaken for near-misses of ours
    assert load_config({"megatron_training": {"stage": "ray_grpo"}, "rl_config": {}, "actor_config": {}}) == load_config(None)
