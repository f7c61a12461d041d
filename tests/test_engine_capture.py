"""vLLM captures driven by our config (engines/attach.py), against the fake vLLM 0.33.0
(tests/fake_vllm.py: a fake, since vLLM needs a GPU; its LLM / AsyncLLM methods and its profiler
config follow the signatures and fields recorded from the real release in
mindspeed_profiler/data/vllm-0.33.0.json, checked in tests/test_engine_capture_fakes.py).

The fake records a real Kineto trace on the CPU in this process, so our own profiler runs the
`markers` backend here (one torch profiler per process; a real engine's workers are other
processes), except where a test is about that very clash (in_process).
"""
from __future__ import annotations

import asyncio
import gzip
import json
import threading

import pytest

from fake_engine_base import FakeServer
from fake_vllm import FakeVllm
from profiler_testutil import meta_of, profile_config
from mindspeed_profiler.analysis.pipeline.batch import analyse_directory
from mindspeed_profiler.core import formats
from mindspeed_profiler.engines.attach import attach_engine, engine_profiler_args
from mindspeed_profiler.runtime.profiler import IntegratedProfiler

STAGES = ("actor_generate", "actor_update")


@pytest.fixture
def vllm(clean_state):
    fake = FakeVllm(tp_size=2).install()
    yield fake
    fake.uninstall()


def run(prof, iters, engine=None, calls=None):
    """`iters` iterations of generate + update under `prof`; `calls[it]`: generate calls in `it`."""
    prof.start()
    for it in range(1, iters + 1):
        for stage in STAGES:
            for _ in range((calls or {}).get(it, 1) if stage == "actor_generate" else 1):
                with prof.stage(stage):
                    if engine is not None and stage == "actor_generate" and hasattr(engine, "generate"):
                        engine.generate(["a prompt"])
        prof.step()
    prof.stop()


def engine_capture(tmp_path, fake, engine_kind="vllm", **integrated):
    cfg = profile_config(tmp_path, backend="markers", **integrated)
    llm = fake.LLM("m", **engine_profiler_args(cfg, engine=engine_kind)["kwargs"])
    return cfg, llm, IntegratedProfiler(cfg, role="actor", rank=0, world_size=1)


def test_selected_calls_are_captured_per_worker_and_analysed(tmp_path, vllm):
    cfg, llm, prof = engine_capture(tmp_path, vllm, stage="actor_generate", profile_step_start=2, profile_step_end=4,
                                    profile_level="level1", profile_with_stack=True)
    handle = attach_engine(prof, llm)
    run(prof, 4, llm)
    # iterations 2 and 3, one capture per engine worker (tp 0, 1), each its own directory
    assert [(m["steps"], m["rank"]) for m in handle.captures] == [([2, 2], 0), ([2, 2], 1), ([3, 3], 0), ([3, 3], 1)]
    starts = vllm.bound.calls_to("vllm.entrypoints.llm.LLM.start_profile")
    assert len(starts) == 2 and len(vllm.bound.calls_to("vllm.entrypoints.llm.LLM.stop_profile")) == 2
    # our flags per session: level1 means record_shapes + with_flops here, with_stack asked
    assert starts[0]["profiler_kwargs"] == {"record_shapes": True, "profile_memory": False, "with_stack": True,
                                            "with_modules": False, "with_flops": True}
    assert llm.core.sessions[0]["kwargs"]["record_shapes"] is True
    for m in handle.captures:
        d = tmp_path / "actor_generate" / m["directory"].rsplit("/", 1)[1]
        on_disk = meta_of(d)
        assert set(on_disk) == set(formats.META_KEYS)
        assert (on_disk["role"], on_disk["stage"], on_disk["backend"], on_disk["status"]) == \
               ("actor-vllm", "actor_generate", "vllm", "ok")
        engine = on_disk["options"]["engine"]
        assert (engine["name"], engine["version"], engine["worker"]["tp"]) == ("vllm", "0.33.0", on_disk["rank"])
        assert any("vLLM has no profiler levels" in n for n in on_disk["notes"])
        trace = next(f for f in on_disk["trace_files"] if f.endswith(".pt.trace.json.gz"))
        assert json.loads(gzip.open(d / trace).read())["traceEvents"]   # a real Kineto trace
        assert formats.parse_capture_dir_name(d.name)["role"] == "actor-vllm"
    assert not any((tmp_path / "engine" / "vllm").iterdir())   # every output placed
    # analysed like any capture, with role / stage / step from our metadata
    summary, _ = analyse_directory(tmp_path, jobs=1, progress=False, html=False, write=False)
    ours = [c for c in summary["captures"] if c.get("role") == "actor-vllm"]
    assert sorted((c["rank"], tuple(c["step_range"]), c["stage"], c["kind"]) for c in ours) == [
        (0, (2, 2), "actor_generate", "torch"), (0, (3, 3), "actor_generate", "torch"),
        (1, (2, 2), "actor_generate", "torch"), (1, (3, 3), "actor_generate", "torch")]
    assert all(c.get("error") is None for c in ours), [c.get("error") for c in ours]


def test_the_decision_is_the_profilers_own(tmp_path, vllm):
    """stage: all records whole iterations: the engine's stage is captured in them; a stage list
    without it, a rank not selected, profile: false capture nothing; a second call is `_c2`."""
    cfg, llm, prof = engine_capture(tmp_path / "all", vllm, profile_step_start=2, profile_step_end=3)
    handle = attach_engine(prof, llm)
    run(prof, 3, llm, calls={2: 2})
    assert [(m["steps"], m["rank"]) for m in handle.captures] == [([2, 2], 0), ([2, 2], 1)] * 2
    assert "_step2-2_c2_" in handle.captures[2]["directory"]
    for integrated, rank in (({"stage": "actor_update"}, 0), ({"profile_ranks": [1]}, 0), ({"profile": False}, 0)):
        cfg, llm, _ = engine_capture(tmp_path / "none", vllm, profile_step_start=1, profile_step_end=3, **integrated)
        prof = IntegratedProfiler(cfg, role="actor", rank=rank, world_size=2)
        handle = attach_engine(prof, llm)
        run(prof, 2, llm)
        assert handle.captures == [] and llm.core.sessions == [], integrated


def test_async_llm_from_sync_code(tmp_path, vllm):
    """AsyncLLM's start / stop are coroutines: run with asyncio.run when no loop runs, on the
    engine's loop when given one running in another thread, as tasks on a loop running here."""
    cfg = profile_config(tmp_path, backend="markers", stage="actor_generate", profile_step_start=1, profile_step_end=2)
    args = engine_profiler_args(cfg)["kwargs"]
    # no loop anywhere
    engine = vllm.AsyncLLM("m", **args)
    prof = IntegratedProfiler(cfg, role="actor", rank=0, world_size=1)
    handle = attach_engine(prof, engine)
    run(prof, 1)
    assert {m["role"] for m in handle.captures} == {"actor-vllm", "actor-vllm-frontend"}   # AsyncLLM's own trace too
    # the engine's loop in another thread
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        prof = IntegratedProfiler(cfg, role="actor", rank=0, world_size=1)
        handle = attach_engine(prof, vllm.AsyncLLM("m", **args), loop=loop)
        run(prof, 1)
        assert len(handle.captures) == 3 and all(m["status"] == "ok" for m in handle.captures)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.close()

    # a loop running in this thread: tasks, placed once the stop has run
    async def main():
        prof = IntegratedProfiler(cfg, role="actor", rank=0, world_size=1)
        handle = attach_engine(prof, vllm.AsyncLLM("m", **args))
        prof.start()
        with prof.stage("actor_generate"):
            await asyncio.sleep(0)   # the stage's code awaits: the start task runs
        await asyncio.sleep(0.05)
        for _ in range(100):
            if handle.captures:
                break
            await asyncio.sleep(0.02)
        prof.stop()
        return handle
    handle = asyncio.run(main())
    assert len(handle.captures) == 3 and all(m["status"] == "ok" for m in handle.captures)
    assert any("started as a task" in n for n in handle.captures[0]["notes"])


def test_a_vllm_server_by_url(tmp_path, vllm):
    cfg = profile_config(tmp_path, backend="markers", stage="actor_generate", profile_step_start=1, profile_step_end=2)
    with vllm.server(**engine_profiler_args(cfg)["kwargs"]) as srv:
        prof = IntegratedProfiler(cfg, role="rollout", rank=3, world_size=4)
        handle = attach_engine(prof, srv.url, kind="vllm", replica=1)
        run(prof, 1)
    path, body = srv.requests[0]
    assert path == "/start_profile" and set(body) == {"profile_prefix", "profiler_kwargs"}
    assert srv.requests[1] == ("/stop_profile", None)
    assert [(m["role"], m["rank"], m["status"]) for m in handle.captures] == [("rollout-vllm-r1", 0, "ok"),
                                                                             ("rollout-vllm-r1", 1, "ok")]
    assert handle.captures[0]["options"]["engine"]["replica"] == 1
    assert handle.captures[0]["options"]["engine"]["attached_by"] == {"role": "rollout", "rank": 3}


@pytest.mark.parametrize("fault", ["start", "stop", "no profiler", "http 500", "http timeout"])
def test_an_engine_failure_is_a_warning_and_training_goes_on(tmp_path, vllm, runtime_warnings, fault):
    cfg = profile_config(tmp_path, backend="markers", stage="actor_generate", profile_step_start=1, profile_step_end=3)
    kwargs = engine_profiler_args(cfg)["kwargs"] if fault != "no profiler" else {}
    prof = IntegratedProfiler(cfg, role="actor", rank=0, world_size=1)
    if fault.startswith("http"):
        srv = FakeServer({"/start_profile": lambda b: {}, "/stop_profile": lambda b: {}})
        srv.status, srv.delay_s = (500, 0.0) if fault == "http 500" else (None, 1.0)
        with srv:
            handle = attach_engine(prof, srv.url, kind="vllm", timeout_s=0.2)
            run(prof, 2)
    else:
        llm = vllm.LLM("m", **kwargs)
        if fault in ("start", "stop"):
            vllm.bound.fail[f"vllm.entrypoints.llm.LLM.{fault}_profile"] = RuntimeError("engine core died")
        handle = attach_engine(prof, llm)
        run(prof, 2, llm)
    assert len(handle.captures) == 2   # each selected call: a failed capture's metadata, nothing raised
    for m in handle.captures:
        on_disk = json.loads(open(f"{m['directory']}/{formats.META_FILE}").read())
        assert on_disk["status"] == "failed" and on_disk["errors"], on_disk
    assert handle.captures[0]["errors"][0]["phase"] == ("stop" if fault == "stop" else "start")
    assert runtime_warnings("training goes on"), fault


class _LateAsyncEngine:
    """An AsyncLLM-like engine (coroutines on its own loop) whose start_profile answers late."""

    def __init__(self, delay_s: float):
        self.delay_s, self.calls = delay_s, []

    async def start_profile(self, profile_prefix=None, **options):
        await asyncio.sleep(self.delay_s)
        self.calls.append("start")

    async def stop_profile(self):
        self.calls.append("stop")


@pytest.mark.parametrize("how", ["http", "coroutine"])
def test_hostile4_item6_a_start_answered_late_is_always_stopped(tmp_path, vllm, runtime_warnings, how):
    """Issue 45 item 6: a start_profile that answers after timeout_s fails the capture, and the
    engine is told to stop at once: an engine that began recording late must not record for the
    rest of the run (before: no stop_profile was ever sent)."""
    cfg = profile_config(tmp_path, backend="markers", stage="actor_generate", profile_step_start=1, profile_step_end=2)
    prof = IntegratedProfiler(cfg, role="actor", rank=0, world_size=1)
    if how == "http":
        srv = FakeServer({"/start_profile": lambda b: {}, "/stop_profile": lambda b: {}})
        srv.delays["/start_profile"] = 0.6
        with srv:
            handle = attach_engine(prof, srv.url, kind="vllm", timeout_s=0.2)
            run(prof, 1)
            paths = [p for p, _ in srv.requests]
        assert paths == ["/start_profile", "/stop_profile"], paths
    else:
        engine = _LateAsyncEngine(0.4)
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, daemon=True)
        thread.start()
        try:
            handle = attach_engine(prof, engine, kind="vllm", loop=loop, timeout_s=0.1)
            run(prof, 1)
            for _ in range(100):   # the start goes on on the engine's loop; the stop is queued behind it
                if "stop" in engine.calls:
                    break
                threading.Event().wait(0.02)
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(5)
        assert engine.calls[-1] == "stop", engine.calls
    [meta] = handle.captures
    assert meta["status"] == "failed" and meta["errors"][0]["phase"] == "start"
    assert any("stop_profile sent at once" in n for n in meta["notes"]), meta["notes"]


def test_in_process_engine_is_skipped_while_our_capture_records(tmp_path, vllm, runtime_warnings):
    """MindSpeed-RL's integrated mode: the engine runs in the actor's process, where our torch
    capture of the stage already records its ops; starting a second torch profiler there would
    clash, so the engine's capture is skipped, said once."""
    cfg = profile_config(tmp_path, backend="torch", stage="actor_generate", profile_step_start=1, profile_step_end=2)
    llm = vllm.LLM("m", **engine_profiler_args(cfg)["kwargs"])
    prof = IntegratedProfiler(cfg, role="actor", rank=0, world_size=1)
    handle = attach_engine(prof, llm, in_process=True)
    run(prof, 1, llm)
    assert handle.captures == [] and llm.core.sessions == []
    assert runtime_warnings("skipped: our own capture records in this process")


def test_vllm_ascend_gets_no_profiler_kwargs_and_its_directories_become_ours(tmp_path, clean_state):
    fake = FakeVllm(tp_size=2, ascend=True).install()
    try:
        cfg = profile_config(tmp_path, backend="markers", stage="actor_generate", profile_step_start=1,
                             profile_step_end=2, profile_record_shapes=True, profile_with_stack=True)
        args = engine_profiler_args(cfg, engine="vllm-ascend")["kwargs"]
        assert "torch_profiler_activities" not in args["profiler_config"]
        llm = fake.LLM("m", **args)
        prof = IntegratedProfiler(cfg, role="actor", rank=0, world_size=1)
        handle = attach_engine(prof, llm, kind="vllm-ascend")
        run(prof, 1, llm)
    finally:
        fake.uninstall()
    assert fake.bound.calls_to("vllm.entrypoints.llm.LLM.start_profile")[0].get("profiler_kwargs") is None
    assert [(m["rank"], m["device"], m["backend"]) for m in handle.captures] == [(0, "npu", "vllm-ascend"),
                                                                                (1, "npu", "vllm-ascend")]
    for m in handle.captures:
        name = m["directory"].rsplit("/", 1)[1]
        parsed = formats.parse_capture_dir_name(name)
        assert (parsed["role"], parsed["format"], parsed["first"]) == ("actor-vllm-ascend", "ascend", 1)
        assert (tmp_path / "actor_generate" / name / "FRAMEWORK").is_dir()
        notes = " ".join(m["notes"])
        assert "vllm-ascend fixes torch_npu's Level1" in notes
        assert "profile_record_shapes: true is not passed per capture" in notes
        assert "profile_with_stack: true is not honoured" in notes


def test_bad_arguments_are_refused_with_what_is_allowed(tmp_path, vllm):
    cfg = profile_config(tmp_path, backend="markers")
    with pytest.raises(ValueError, match=r"engine 'tensorrt' is not supported: allowed: vllm, vllm-ascend, sglang"):
        engine_profiler_args(cfg, engine="tensorrt")
    prof = IntegratedProfiler(cfg, role="actor", rank=0, world_size=1)
    llm = vllm.LLM("m")
    for kwargs, match in (({"replica": -1}, r"replica=-1 is not allowed: None or an int >= 0"),
                          ({"num_steps": 0}, r"num_steps=0 is not allowed"),
                          ({"profile_by_stage": True}, r"profile_by_stage=True is not allowed: true only for SGLang"),
                          ({"timeout_s": 0}, r"timeout_s=0 is not allowed"),
                          ({"stage": "all"}, r"stage name 'all' is not allowed"),
                          ({"kind": "trt"}, r"engine 'trt' is not supported")):
        with pytest.raises(ValueError, match=match):
            attach_engine(prof, llm, **kwargs)
    with pytest.raises(ValueError, match=r"neither a vLLM LLM / AsyncLLM nor an SGLang Engine"):
        attach_engine(prof, object())
    with pytest.raises(ValueError, match=r"engine='localhost:30000' is not allowed: a URL"):
        attach_engine(prof, "localhost:30000")
    assert prof.observers == []


@pytest.mark.skipif(not __import__("torch").cuda.is_available(), reason="needs a CUDA GPU (the device tool's machine)")
def test_a_cuda_trace_as_vllm_names_it_is_analysed_with_its_kernels(tmp_path, vllm):
    """On a GPU the fake records CPU + CUDA activity, as a real vLLM worker does (no vLLM there
    either: it is not installed and may not be): the engine's trace, named as vLLM 0.33.0 names it
    and placed in our layout, is analysed with its kernels and device time."""
    cfg, llm, prof = engine_capture(tmp_path, vllm, stage="actor_generate", profile_step_start=1, profile_step_end=2)
    handle = attach_engine(prof, llm)
    run(prof, 1, llm)
    assert [m["status"] for m in handle.captures] == ["ok", "ok"]
    summary, _ = analyse_directory(tmp_path, jobs=1, progress=False, html=False, write=False)
    ours = [c for c in summary["captures"] if c.get("role") == "actor-vllm"]
    assert len(ours) == 2 and all(c.get("error") is None for c in ours)
    for c in ours:
        assert c["top_kernels"], c.get("warnings")   # GPU kernels of the engine's forward steps
        print("engine capture", c["path"], "kernels:", [k.get("name") for k in c["top_kernels"]][:3],
              "device:", c.get("device"))


@pytest.mark.skipif(not hasattr(IntegratedProfiler, "attach_engine"),
                    reason="IntegratedProfiler.attach_engine is added at integration (runtime/profiler.py)")
def test_prof_attach_engine_is_the_same_call(tmp_path, vllm):
    """`prof.attach_engine(engine, **kw)` (the issue's spelling) hands over to engines.attach."""
    cfg, llm, prof = engine_capture(tmp_path, vllm, stage="actor_generate", profile_step_start=1, profile_step_end=2)
    handle = prof.attach_engine(llm, replica=2)
    assert handle in prof.observers and handle.role == "actor-vllm-r2"
    run(prof, 1, llm)
    assert [m["status"] for m in handle.captures] == ["ok", "ok"]
    import mindspeed_profiler
    if hasattr(mindspeed_profiler, "attach_engine"):   # the package-root exports, once added
        assert mindspeed_profiler.attach_engine is attach_engine
        assert mindspeed_profiler.engine_profiler_args is engine_profiler_args


def test_traces_written_after_stop_are_placed_at_the_next_boundary(tmp_path, vllm):
    """A trace not there yet when stop_profile returns (a slow shared disk) is placed at the next
    step(); one that never comes (an engine on another host) is a failed capture saying so."""
    cfg, llm, prof = engine_capture(tmp_path, vllm, stage="actor_generate", profile_step_start=1, profile_step_end=3)
    handle = attach_engine(prof, llm)
    late = []
    real_stop = llm.core.stop
    llm.core.stop = lambda: late.append(real_stop)   # the engine stopped; its files come later
    prof.start()
    with prof.stage("actor_generate"):
        llm.generate(["a"])
    assert handle.captures == [] and len(handle.pending) == 1
    late.pop()()   # the files arrive
    prof.step()
    assert [m["status"] for m in handle.captures] == ["ok", "ok"]
    llm.core.stop = lambda: None   # never written here
    with prof.stage("actor_generate"):
        llm.generate(["b"])
    prof.step()
    prof.stop()
    assert [m["status"] for m in handle.captures] == ["ok", "ok", "failed"]
    assert "no trace of this engine session" in handle.captures[2]["errors"][0]["error"]
    assert not any("had not stopped by itself" in n for n in handle.captures[2]["notes"])
    real_stop()   # the fake's recording, ended
