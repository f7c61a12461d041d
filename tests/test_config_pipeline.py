"""load_config in one pass (issue 32): the layout detected once, the source converted once, the
caller's data never changed, and an override in a framework's own keys does not change whose layout
the data has."""
from __future__ import annotations

import copy

import pytest

from mindspeed_profiler.config import dialects, load
from mindspeed_profiler.config import load_config
from mindspeed_profiler.config.dialects import collect_notes

VERL = {"global_profiler": {"tool": "npu", "steps": [1], "save_path": "out"},
        "actor_rollout_ref": {"actor": {"profiler": {"enable": True, "ranks": [0],
                                                     "tool_config": {"npu": {"level": "level1"}}}}}}


def counted(monkeypatch, module, name):
    calls = []
    real = getattr(module, name)

    def wrapper(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, wrapper)
    return calls


@pytest.mark.parametrize("source, overrides", [
    (VERL, ["global_profiler.steps=[2]", "integrated.warmup_steps=1"]),
    ({"profiler_config": {"integrated": {"profile": True}}}, ["integrated.profile_steps=[3]"]),
    ({"cluster": {"profiling": {"backend": "nsight", "steps": [0]}}}, ["cluster.profiling.steps=[1]"]),
    (None, ["integrated.profile=false"]),
])
def test_the_layout_is_detected_once_and_the_source_converted_once(monkeypatch, source, overrides):
    detects = counted(monkeypatch, dialects, "detect")
    converts = counted(monkeypatch, load, "to_container")
    load_config(source, overrides, check_paths=False)
    assert len(detects) == 1 and len(converts) == 1


def test_the_callers_data_is_not_changed():
    data = copy.deepcopy(VERL)
    cfg = load_config(data, ["global_profiler.steps=[2]", "actor_rollout_ref.actor.profiler.ranks=[1]",
                             "integrated.warmup_steps=1"], check_paths=False)
    assert data == VERL
    assert cfg.integrated.profile_steps == (2,) and cfg.integrated.role_ranks["actor"] == (1,)
    assert cfg.integrated.warmup_steps == 1
    block = {"integrated": {"profile": True, "profile_steps": [1]}}
    load_config(block, ["integrated.profile_steps=[4]", "tracer.enable=true"], check_paths=False)
    assert block == {"integrated": {"profile": True, "profile_steps": [1]}}


def test_an_override_in_another_frameworks_keys_keeps_the_layout():
    # An RLinf config stays RLinf's when an override writes verl's keys into it (before issue 32 the
    # layout was detected again after the overrides, and the RLinf tracer was dropped).
    with collect_notes() as notes:
        cfg = load_config({"cluster": {"tracer": {"enable": True, "output_file": "/tmp/x/t.jsonl"}}},
                          ["global_profiler.tool=npu", "global_profiler.steps=[1]"], check_paths=False)
    assert cfg.tracer.enable and cfg.tracer.output_dir == "/tmp/x"
    assert all(title == "RLinf" for title, _, _ in notes)
