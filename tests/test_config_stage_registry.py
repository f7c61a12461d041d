"""Validation registers nothing until the config is accepted: the stages a config declares
(`register_stages`) count for its own `stage` while it is checked, and are registered only when
the whole config is accepted."""
from __future__ import annotations

import uuid

import pytest

from mindspeed_profiler import ProfilerConfigError, load_config
from mindspeed_profiler.capture import stages as stage_registry


def _fresh() -> str:
    return f"stage_{uuid.uuid4().hex[:10]}"


def test_a_rejected_config_leaves_the_stage_registry_unchanged():
    name = _fresh()
    before = stage_registry.registered_stages()
    with pytest.raises(ProfilerConfigError) as exc:
        load_config({"integrated": {"register_stages": [name], "stage": name, "profile_ranks": "0,1"}})
    assert [w for w, _ in exc.value.problems] == ["profiler_config.integrated.profile_ranks"]   # only the bad field
    assert stage_registry.registered_stages() == before and not stage_registry.is_stage(name)


def test_an_accepted_config_registers_what_it_declares():
    name, other = _fresh(), _fresh()
    cfg = load_config({"integrated": {"register_stages": [name, other], "stage": [name, "actor_update"]}})
    assert cfg.integrated.stages == (name, "actor_update")
    assert stage_registry.is_stage(name) and stage_registry.is_stage(other)


def test_a_declared_stage_counts_only_in_its_own_config():
    name = _fresh()
    with pytest.raises(ProfilerConfigError, match="unknown stage"):
        load_config({"integrated": {"stage": name}})           # not declared, not registered
    with pytest.raises(ProfilerConfigError):
        load_config({"integrated": {"register_stages": ["not a name!"], "stage": name}})
    assert not stage_registry.is_stage(name)


def test_a_rejected_mindspeed_style_block_registers_nothing_either():
    name = _fresh()
    with pytest.raises(ProfilerConfigError):
        load_config({"profiler_config": {"register_stages": [name], "integrated": {"stage": name, "profile_level": "level9"}}})
    assert not stage_registry.is_stage(name)


def test_registries_are_instances_a_block_can_scope():
    """Each registry is one documented instance; scoped() undoes what a block registers (no test
    reaches into a registry's private state)."""
    from mindspeed_profiler.analysis import inputs
    from mindspeed_profiler.backends import registry
    from mindspeed_profiler.backends.marker_kinds import MARKERS, MarkerKind, register_marker_kind

    name = _fresh()
    with stage_registry.scoped_stages():
        stage_registry.register_stage(name)
        assert stage_registry.is_stage(name)
    assert not stage_registry.is_stage(name)
    before = [c.name for c in registry.backend_classes()]
    with registry.REGISTRY.scoped() as reg:
        reg.entries.pop("torch")
        assert "torch" not in registry.backend_names()
    assert [c.name for c in registry.backend_classes()] == before
    kinds = [k.name for k in inputs.input_kinds()]
    with MARKERS.scoped(), inputs.REGISTRY.scoped():
        register_marker_kind(MarkerKind("test_scoped", object))
        assert MARKERS.get("test_scoped") is not None
    assert MARKERS.get("test_scoped") is None and [k.name for k in inputs.input_kinds()] == kinds
