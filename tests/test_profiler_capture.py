"""Real torch.profiler captures on CPU: windows, step lists, stages, ranks, levels, metadata, off-is-off."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch

from mindspeed_profiler import IntegratedProfiler, load_config, profiler_start, profiler_step
from mindspeed_profiler.core.state import STATE
from mindspeed_profiler.backends import layout
from profiler_testutil import (annotations, capture_dirs, load_trace, meta_of, profile_config, profiler_steps, rel_names,
                               train)


@pytest.mark.parametrize("start,end", [(1, 2), (2, 4), (3, 6)])
def test_window_captures_exactly_its_steps(tmp_path, start, end):
    prof = IntegratedProfiler(profile_config(tmp_path, profile_step_start=start, profile_step_end=end), role="actor", rank=0, world_size=1)
    train(prof, 7)
    assert rel_names(tmp_path) == [f"all/actor_rank0_step{start}-{end - 1}"]
    (d,) = capture_dirs(tmp_path)
    assert profiler_steps(load_trace(d)) == list(range(start, end))
    meta = meta_of(d)
    assert meta["status"] == "ok" and meta["errors"] == []
    assert meta["steps"] == [start, end - 1] and meta["stage"] == "all" and meta["role"] == "actor"
    assert meta["backend"] == "torch" and meta["device"] == "cpu" and meta["level"] == "level0"
    assert meta["pid"] == os.getpid() and meta["clock"]["wall_ns"] > 0
    assert meta["trace_files"] == [layout.trace_file_name("actor_rank0")]


@pytest.mark.parametrize("steps,warmup,expected", [
    ([2, 3, 6], 0, {"2-3": [2, 3], "6-6": [6]}),
    ([2, 3, 6], 1, {"2-3": [2, 3], "6-6": [6]}),
    ([1, 4, 5, 7], 2, {"1-1": [1], "4-5": [4, 5], "7-7": [7]}),
])
def test_step_list_one_capture_per_run(tmp_path, steps, warmup, expected):
    prof = IntegratedProfiler(profile_config(tmp_path, profile_steps=steps, warmup_steps=warmup), role="actor", rank=0, world_size=1)
    train(prof, 8, stages=("actor_update",))
    got = {}
    for d in capture_dirs(tmp_path):
        p = layout.parse_capture_dir_name(d.name)
        got[f"{p['first']}-{p['last']}"] = profiler_steps(load_trace(d))
    assert got == expected


def test_dpo_warmup_recorded_in_metadata(tmp_path):
    cfg = load_config("configs/profiler_config/dpo.yaml", overrides=[
        f"integrated.profile_save_path={tmp_path}", "integrated.profile_step_start=3", "integrated.profile_step_end=5",
        "integrated.backend=torch"])
    prof = IntegratedProfiler(cfg, role="dpo", rank=0, world_size=1)
    train(prof, 6, stages=("actor_update",))
    (d,) = capture_dirs(tmp_path)
    meta = meta_of(d)
    assert meta["steps"] == [3, 4] and meta["warmup_steps"] == 1 and meta["profiled_iterations"] == [2, 4]
    assert profiler_steps(load_trace(d)) == [3, 4]  # the warmup iteration is not recorded


def test_named_stage_one_capture_per_call(tmp_path):
    prof = IntegratedProfiler(profile_config(tmp_path, stage="actor_update", profile_step_start=2, profile_step_end=4), role="actor", rank=0, world_size=1)
    train(prof, 5, repeat={("actor_update", 3): 2})
    assert rel_names(tmp_path) == [
        "actor_update/actor_rank0_step2-2",
        "actor_update/actor_rank0_step3-3",
        "actor_update/actor_rank0_step3-3_c2",
    ]
    for d in capture_dirs(tmp_path):
        trace = load_trace(d)
        assert profiler_steps(trace) == [meta_of(d)["steps"][0]]
        assert "actor_update" in annotations(trace) and "actor_generate" not in annotations(trace)
        assert meta_of(d)["stage"] == "actor_update"


def test_stage_list_and_all_stage_annotations(tmp_path):
    prof = IntegratedProfiler(profile_config(tmp_path / "list", stage=["actor_generate", "actor_update"], profile_steps=[2]),
                              role="actor", rank=0, world_size=1)
    train(prof, 3)
    assert rel_names(tmp_path / "list") == ["actor_generate/actor_rank0_step2-2", "actor_update/actor_rank0_step2-2"]
    prof = IntegratedProfiler(profile_config(tmp_path / "all", profile_step_start=2, profile_step_end=3), role="actor", rank=0, world_size=1)
    train(prof, 3)
    (d,) = capture_dirs(tmp_path / "all")
    assert {"actor_generate", "actor_update", "ProfilerStep#2"} <= annotations(load_trace(d))


@pytest.mark.parametrize("profile_ranks,expected", [("all", [0, 1, 2, 3]), (2, [2]), ([1, 3], [1, 3])])
def test_rank_matrix(tmp_path, profile_ranks, expected):
    cfg = profile_config(tmp_path, profile_ranks=profile_ranks, profile_step_start=1, profile_step_end=2)
    for rank in range(4):
        train(IntegratedProfiler(cfg, role="actor", rank=rank, world_size=4), 2, stages=("actor_update",))
    assert rel_names(tmp_path) == [f"all/actor_rank{r}_step1-1" for r in expected]
    assert sorted(meta_of(d)["world_size"] for d in capture_dirs(tmp_path)) == [4] * len(expected)


def test_rank_from_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("RANK", "5")
    monkeypatch.setenv("WORLD_SIZE", "8")
    monkeypatch.setenv("LOCAL_RANK", "1")
    prof = IntegratedProfiler(profile_config(tmp_path, profile_ranks=[5]), role="ref")
    train(prof, 1, stages=("reference_compute_log_prob",))
    (d,) = capture_dirs(tmp_path)
    meta = meta_of(d)
    assert (meta["rank"], meta["world_size"], meta["local_rank"]) == (5, 8, 1)
    assert not (tmp_path / "run.json").exists()  # only rank 0 / the driver writes the manifest


def test_profile_false_builds_nothing(tmp_path, monkeypatch):
    def boom(*a, **k):
        raise AssertionError("torch.profiler must not be built when profile is false")

    monkeypatch.setattr(torch.profiler, "profile", boom)
    save = tmp_path / "never"
    cfg = load_config({"integrated": {"profile": False, "profile_save_path": str(save)}})
    prof = IntegratedProfiler(cfg, role="actor")
    assert prof.stage("actor_update") is prof.stage("actor_generate")  # one shared null context
    losses = train(prof, 4)
    assert len(losses) == 4
    assert not save.exists() and list(tmp_path.iterdir()) == []
    assert profiler_start(cfg, "actor") is None
    profiler_step(None)


def test_run_manifest(tmp_path):
    cfg = profile_config(tmp_path, profile_ranks=[1])
    train(IntegratedProfiler(cfg, role="actor", rank=0, world_size=2), 1, stages=())
    run = json.loads((tmp_path / "run.json").read_text())
    assert run["config"]["profiler_config"]["integrated"]["profile_ranks"] == [1]
    assert run["versions"]["torch"] == torch.__version__.split("+")[0] or run["versions"]["torch"].startswith(torch.__version__.split("+")[0])
    assert run["versions"]["python"] == sys.version.split()[0]
    assert run["start_time"].endswith("Z") and run["writer"]["rank"] == 0
    assert capture_dirs(tmp_path) == []  # rank 0 is not selected: manifest only


def test_levels_on_torch(tmp_path):
    def one(level, **extra):
        root = tmp_path / level
        train(IntegratedProfiler(profile_config(root, profile_level=level, **extra), role="a", rank=0, world_size=1), 1, stages=("actor_update",))
        (d,) = capture_dirs(root)
        return load_trace(d), meta_of(d)

    trace, meta = one("level_none", mstx=True)
    cats = {e.get("cat") for e in trace["traceEvents"] if e.get("ph") != "M"}
    assert cats == {"user_annotation"} and {"ProfilerStep#1", "actor_update"} <= annotations(trace)
    assert meta["options"]["annotations_only"] is True
    trace0, _ = one("level0")
    ops0 = [e for e in trace0["traceEvents"] if e.get("cat") == "cpu_op"]
    assert ops0 and not any("Input Dims" in e.get("args", {}) for e in ops0)
    trace1, meta1 = one("level1")
    assert any("Input Dims" in e.get("args", {}) for e in trace1["traceEvents"] if e.get("cat") == "cpu_op")
    assert meta1["options"]["record_shapes"] and meta1["options"]["with_flops"]
    trace2, meta2 = one("level2")
    assert meta2["options"]["profile_memory"] and meta2["options"]["with_stack"]
    assert any(e.get("name") == "[memory]" for e in trace2["traceEvents"])


def test_size_budget_skips_later_captures(tmp_path, caplog):
    prof = IntegratedProfiler(profile_config(tmp_path, profile_steps=[1, 3, 5], trace_size_budget_mb=0.001), role="a", rank=0, world_size=1)
    train(prof, 6, stages=("actor_update",))
    statuses = [(m["steps"][0], m["status"]) for m in prof.captures]
    assert statuses == [(1, "ok"), (3, "skipped"), (5, "skipped")]
    assert "budget" in caplog.text
    assert [meta_of(d)["status"] for d in capture_dirs(tmp_path)].count("skipped") == 2


def test_resume_mid_window(tmp_path):
    prof = IntegratedProfiler(profile_config(tmp_path, profile_step_start=2, profile_step_end=6), role="a", rank=0, world_size=1)
    prof.start(iteration=4)
    for _ in range(4):
        torch.ones(3).sum()
        prof.step()
    prof.stop()
    (d,) = capture_dirs(tmp_path)
    assert profiler_steps(load_trace(d)) == [4, 5] and meta_of(d)["steps"] == [4, 5]


def test_state_written_and_reset(tmp_path):
    seen = {}
    prof = IntegratedProfiler(profile_config(tmp_path, mstx=True, profile_step_start=2, profile_step_end=3, mstx_domain_include=["d1"]),
                              role="a", rank=0, world_size=1)
    prof.start()
    seen[1] = (STATE.capture_active, STATE.device, STATE.mstx_enabled, STATE.iteration)
    prof.step()
    with prof.stage("actor_update"):
        seen["stage"] = STATE.stage
    seen[2] = (STATE.capture_active, STATE.iteration, STATE.mstx_domain_include)
    prof.step()
    seen[3] = STATE.capture_active
    prof.stop()
    prof.stop()  # idempotent
    assert seen == {1: (False, "cpu", True, 1), "stage": "actor_update", 2: (True, 2, ("d1",)), 3: False}
    assert (STATE.capture_active, STATE.device, STATE.mstx_enabled, STATE.stage, STATE.iteration) == (False, None, False, None, None)
    # a rank that is not selected does not turn mstx on
    p2 = IntegratedProfiler(profile_config(tmp_path / "b", mstx=True, profile_ranks=[1]), role="a", rank=0, world_size=2)
    p2.start()
    assert STATE.mstx_enabled is False
    p2.stop()


def test_open_capture_exported_at_interpreter_exit(tmp_path):
    script = textwrap.dedent(f"""
        import torch
        from mindspeed_profiler import IntegratedProfiler, load_config
        cfg = load_config({{"integrated": {{"profile": True, "profile_save_path": {str(tmp_path)!r},
                           "profile_step_start": 2, "profile_step_end": 10, "backend": "torch"}}}})
        prof = IntegratedProfiler(cfg, role="crash", rank=0, world_size=1)
        prof.start()
        for it in range(1, 5):
            torch.ones(4).sum()
            prof.step()
        # no stop(): the interpreter exits mid-window
    """)
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120, capture_output=True)
    (d,) = capture_dirs(tmp_path)
    meta = meta_of(d)
    # iteration 5 had begun (4 step() calls) when the interpreter exited: it is in, in part
    assert meta["status"] == "ok" and profiler_steps(load_trace(d)) == [2, 3, 4, 5]
    assert any("stopped early" in n for n in meta["notes"])


def test_mindspeed_style_functions(tmp_path):
    cfg = profile_config(tmp_path, stage="actor_update", profile_step_start=2, profile_step_end=3)
    assert profiler_start(cfg, "actor_update", profiler_iteration=1) is None  # outside the window
    assert profiler_start(cfg, "actor_generate", profiler_iteration=2) is None  # stage not selected
    shot = profiler_start(cfg, "actor_update", profiler_iteration=2, worker_role="actor", rank=0, world_size=1)
    torch.ones(8).sum()
    profiler_step(shot)
    assert rel_names(tmp_path) == ["actor_update/actor_rank0_step2-2"]
    whole = profile_config(tmp_path / "w", profile_step_start=1, profile_step_end=3)
    prof = profiler_start(whole, "integrated", rank=0, world_size=1)
    for _ in range(3):
        profiler_step(prof)
    prof.stop()
    assert rel_names(tmp_path / "w") == ["all/integrated_rank0_step1-2"]


def test_mindspeed_style_stage_called_twice_in_one_iteration(tmp_path, monkeypatch):
    """Each profiler_start(..., profiler_iteration=N) builds a new profiler; the second call of the
    stage in iteration N is still `_c2`, even when both start within the same millisecond."""
    monkeypatch.setattr(layout, "time_token", lambda when=None: "20260101000000000")  # one millisecond
    cfg = profile_config(tmp_path, stage="actor_update", profile_step_start=2, profile_step_end=3)
    for value in (1.0, 2.0):
        shot = profiler_start(cfg, "actor_update", profiler_iteration=2, worker_role="actor", rank=0, world_size=1)
        torch.full((8,), value).sum()
        profiler_step(shot)
    assert rel_names(tmp_path) == ["actor_update/actor_rank0_step2-2", "actor_update/actor_rank0_step2-2_c2"]
    for d in capture_dirs(tmp_path):
        assert meta_of(d)["status"] == "ok" and profiler_steps(load_trace(d)) == [2]


def test_taken_capture_dir_name_moves_to_the_next_millisecond(tmp_path, monkeypatch):
    times = iter(["20260101000000000", "20260101000000000", "20260101000000001"])
    monkeypatch.setattr(layout, "time_token", lambda when=None: next(times))
    first = layout.make_capture_dir(tmp_path, "a_rank0_step1-1_h", "pt")
    second = layout.make_capture_dir(tmp_path, "a_rank0_step1-1_h", "pt")
    assert first.name.endswith("_20260101000000000_pt") and second.name.endswith("_20260101000000001_pt")
    assert layout.parse_capture_dir_name(second.name)["first"] == 1


def test_bad_arguments_fail_clearly(tmp_path):
    with pytest.raises(ValueError, match="role"):
        IntegratedProfiler(profile_config(tmp_path), role="a/b")
    with pytest.raises(TypeError, match="ProfilerConfig"):
        IntegratedProfiler({"profile": True})
    prof = IntegratedProfiler(profile_config(tmp_path), role="a", rank=0, world_size=1)
    with pytest.raises(ValueError, match="1-based"):
        prof.start(iteration=0)


def test_stop_during_warmup_leaves_kineto_clean(tmp_path):
    prof = IntegratedProfiler(profile_config(tmp_path, profile_step_start=3, profile_step_end=5, warmup_steps=2), role="a", rank=0, world_size=1)
    prof.start()  # iteration 1 begins: warmup
    torch.ones(2).sum()
    prof.stop()
    (d,) = capture_dirs(tmp_path)
    meta = meta_of(d)
    assert meta["status"] == "ok" and meta["trace_files"] == [] and any("stopped early" in n for n in meta["notes"])
    with torch.profiler.profile() as p:  # the next profiler works
        torch.ones(2).sum()
    assert any(e.name == "aten::sum" for e in p.events())


def test_run_manifest_concurrent_writers(tmp_path):
    import threading

    from mindspeed_profiler.runtime.profiler import write_run_manifest

    cfg = profile_config(tmp_path)
    threads = [threading.Thread(target=write_run_manifest, args=(cfg,), kwargs={"rank": i}) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    run = json.loads((tmp_path / "run.json").read_text())  # one whole file, never interleaved
    assert run["writer"]["rank"] in range(8)
    # no temp files left behind (the empty lock file of run.json's updates stays, as lock files do)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".run.json.lock", "run.json"]
