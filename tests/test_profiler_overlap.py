"""One profiler session per process: overlapping captures, colocated profilers, early stop metadata."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import torch

from mindspeed_profiler import IntegratedProfiler
from mindspeed_profiler.core.state import STATE
from profiler_testutil import annotations, capture_dirs, load_trace, meta_of, profile_config, profiler_steps, rel_names

TESTS = Path(__file__).resolve().parent


def test_nested_selected_stages_do_not_crash_the_process(tmp_path):
    # Two torch.profiler sessions at once used to segfault the interpreter at the outer export:
    # run in a subprocess so that a regression fails this test instead of killing pytest.
    script = textwrap.dedent(f"""
        import sys, torch
        sys.path.insert(0, {str(TESTS)!r})
        from mindspeed_profiler import IntegratedProfiler, load_config
        cfg = load_config({{"integrated": {{"profile": True, "profile_save_path": {str(tmp_path)!r}, "backend": "torch",
                           "stage": ["actor_update", "actor_generate"], "profile_step_start": 1, "profile_step_end": 2}}}})
        prof = IntegratedProfiler(cfg, role="actor", rank=0, world_size=1)
        prof.start()
        with prof.stage("actor_update"):
            torch.ones(4).sum()
            with prof.stage("actor_generate"):
                torch.ones(4).sum()
        with prof.stage("actor_generate"):  # not nested: its own capture
            torch.ones(4).sum()
        prof.step()
        prof.stop()
        print("DONE")
    """)
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and "DONE" in res.stdout, res.stderr[-2000:]
    assert rel_names(tmp_path) == ["actor_generate/actor_rank0_step1-1_c2", "actor_update/actor_rank0_step1-1"]
    outer = next(d for d in capture_dirs(tmp_path) if d.parent.name == "actor_update")
    assert meta_of(outer)["status"] == "ok"
    assert any("actor_generate" in n and "not captured separately" in n for n in meta_of(outer)["notes"])
    assert {"actor_update", "actor_generate"} <= annotations(load_trace(outer))  # the inner one shows inside


def test_colocated_profilers_overlapping_windows_one_capture(tmp_path):
    script = textwrap.dedent(f"""
        import torch
        from mindspeed_profiler import IntegratedProfiler, load_config
        cfg = load_config({{"integrated": {{"profile": True, "profile_save_path": {str(tmp_path)!r}, "backend": "torch",
                           "profile_step_start": 1, "profile_step_end": 3}}}})
        actor = IntegratedProfiler(cfg, role="actor", rank=0, world_size=1)
        ref = IntegratedProfiler(cfg, role="ref", rank=0, world_size=1)
        actor.start(); ref.start()
        for _ in range(3):
            torch.ones(4).sum(); actor.step(); ref.step()
        actor.stop(); ref.stop()
        print("DONE")
    """)
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and "DONE" in res.stdout, res.stderr[-2000:]
    assert rel_names(tmp_path) == ["all/actor_rank0_step1-2"]
    (d,) = capture_dirs(tmp_path)
    assert meta_of(d)["status"] == "ok" and profiler_steps(load_trace(d)) == [1, 2]


def test_stopping_one_colocated_profiler_keeps_the_others_markers(tmp_path):
    actor = IntegratedProfiler(profile_config(tmp_path, profile_steps=[1], mstx=True), role="actor", rank=0, world_size=1)
    ref = IntegratedProfiler(profile_config(tmp_path, profile_steps=[5], mstx=True), role="ref", rank=0, world_size=1)
    actor.start()
    ref.start()
    for _ in range(2):
        actor.step()
        ref.step()
    actor.stop()
    assert STATE.mstx_enabled is True and STATE.device == "cpu" and STATE.iteration == 3  # ref still runs
    ref.stop()
    assert STATE.mstx_enabled is False and STATE.capture_active is False and STATE.iteration is None


def test_early_stop_metadata_steps_are_the_recorded_ones(tmp_path):
    prof = IntegratedProfiler(profile_config(tmp_path, profile_step_start=2, profile_step_end=8), role="a", rank=0, world_size=1)
    prof.start()
    for _ in range(3):  # iterations 1..3 end; iteration 4 begins
        torch.ones(4).sum()
        prof.step()
    prof.stop()
    (d,) = capture_dirs(tmp_path)
    meta = meta_of(d)
    assert profiler_steps(load_trace(d)) == [2, 3, 4]
    assert meta["steps"] == [2, 4] and meta["planned_steps"] == [2, 7] and meta["profiled_iterations"] == [2, 4]


def test_colocated_markers_on_if_any_running_profiler_wants_them(tmp_path):
    """STATE comes from all running profilers of the process, not from the last one started."""
    actor = IntegratedProfiler(profile_config(tmp_path, profile_steps=[5], mstx=True, mstx_domain_include=["rollout"]),
                               role="actor", rank=0, world_size=1)
    ref = IntegratedProfiler(profile_config(tmp_path, profile_steps=[5], mstx=False), role="ref", rank=0, world_size=1)
    critic = IntegratedProfiler(profile_config(tmp_path, profile_steps=[5], mstx=True, mstx_domain_exclude=["noisy", "rollout"]),
                                role="critic", rank=0, world_size=1)
    actor.start()
    ref.start()  # mstx: false, started last
    assert STATE.mstx_enabled is True and STATE.device == "cpu"
    assert (STATE.mstx_domain_include, STATE.mstx_domain_exclude) == (("rollout",), ())
    critic.start()  # a domain is marked when any profiler selects it: rollout (actor), all but noisy (critic)
    assert (STATE.mstx_domain_include, STATE.mstx_domain_exclude) == ((), ("noisy",))
    actor.stop()
    assert STATE.mstx_enabled is True and STATE.mstx_domain_exclude == ("noisy", "rollout")
    critic.stop()
    assert STATE.mstx_enabled is False and STATE.device == "cpu"  # ref still runs
    ref.stop()
    assert STATE.mstx_enabled is False and STATE.device is None and STATE.capture_active is False


def test_stopping_a_tracer_only_profiler_keeps_the_running_ones_stage_and_iteration(tmp_path):
    actor = IntegratedProfiler(profile_config(tmp_path, profile_steps=[5]), role="actor", rank=0, world_size=1)
    actor.start()
    actor.step()
    actor.step()
    with actor.stage("actor_update"):
        side = IntegratedProfiler(profile_config(tmp_path, profile=False), role="side")
        side.start()
        side.stop()
        assert STATE.stage == "actor_update" and STATE.iteration == 3
    actor.stop()
    assert STATE.stage is None and STATE.iteration is None
