"""SGLang captures driven by our config (engines/attach.py), against the fake SGLang 0.5.23
(tests/fake_sglang.py: a fake, since SGLang needs a GPU; its Engine methods and ProfileReq fields
follow the signatures recorded from the real release in mindspeed_profiler/data/sglang-0.5.23.json,
checked in tests/test_engine_capture_fakes.py). Our own profiler runs the `markers` backend: the
fake records a real Kineto trace on the CPU in this process (one torch profiler per process).
"""
from __future__ import annotations

import json

import pytest

from fake_sglang import FakeSglang
from profiler_testutil import profile_config
from test_engine_capture import run
from mindspeed_profiler.analysis.pipeline.batch import analyse_directory
from mindspeed_profiler.core import formats
from mindspeed_profiler.engines.outputs import Session, place
from mindspeed_profiler.engines.attach import attach_engine, engine_profiler_args
from mindspeed_profiler.engines.sglang_engine import worker_of
from mindspeed_profiler.runtime.profiler import IntegratedProfiler

START = "sglang.srt.entrypoints.engine.Engine.start_profile"
STOP = "sglang.srt.entrypoints.engine.Engine.stop_profile"


@pytest.fixture
def sglang(clean_state):
    fake = FakeSglang(tp_size=2).install()
    yield fake
    fake.uninstall()


def setup(tmp_path, fake, **integrated):
    cfg = profile_config(tmp_path, backend="markers", stage="actor_generate", profile_step_start=1, profile_step_end=3,
                         **integrated)
    args = engine_profiler_args(cfg, engine="sglang")
    assert args["kwargs"] == {"enable_metrics": True}
    return fake.Engine(**args["kwargs"]), IntegratedProfiler(cfg, role="actor", rank=0, world_size=1)


def test_engine_captures_per_tp_rank_and_analysed(tmp_path, sglang):
    engine, prof = setup(tmp_path, sglang, profile_record_shapes=True)
    handle = attach_engine(prof, engine)
    run(prof, 2, engine)
    req = sglang.bound.calls_to(START)[0]["kwargs"]
    assert req["activities"] == ["CPU", "GPU"] and req["record_shapes"] is True and req["with_stack"] is False
    assert req["output_dir"].startswith(str(tmp_path / "engine" / "sglang"))
    assert "num_steps" not in req and len(sglang.bound.calls_to(STOP)) == 2
    assert [(m["steps"], m["rank"], m["role"], m["status"]) for m in handle.captures] == [
        ([1, 1], 0, "actor-sglang", "ok"), ([1, 1], 1, "actor-sglang", "ok"),
        ([2, 2], 0, "actor-sglang", "ok"), ([2, 2], 1, "actor-sglang", "ok")]
    assert handle.captures[0]["trace_files"][0].endswith("-TP-0.trace.json.gz")
    assert handle.captures[0]["options"]["engine"]["version"] == "0.5.23"
    assert not any((tmp_path / "engine" / "sglang").iterdir())   # each session's directory emptied and removed
    summary, _ = analyse_directory(tmp_path, jobs=1, progress=False, html=False, write=False)
    ours = sorted((c["rank"], tuple(c["step_range"]), c["stage"], c["kind"], c.get("error"))
                  for c in summary["captures"] if c.get("role") == "actor-sglang")
    assert ours == [(r, (s, s), "actor_generate", "torch", None) for r in (0, 1) for s in (1, 2)]


def test_profile_by_stage_gives_prefill_and_decode_captures(tmp_path, sglang):
    engine, prof = setup(tmp_path, sglang)
    handle = attach_engine(prof, engine, profile_by_stage=True)
    run(prof, 1, engine)
    assert sglang.bound.calls_to(START)[0]["kwargs"]["profile_by_stage"] is True
    assert sorted((m["role"], m["rank"]) for m in handle.captures) == [
        ("actor-sglang-decode", 0), ("actor-sglang-decode", 1), ("actor-sglang-extend", 0), ("actor-sglang-extend", 1)]


def test_num_steps_stops_by_itself_or_at_the_next_capture(tmp_path, sglang):
    """num_steps=2: SGLang stops after two forward steps without stop_profile, and the capture is
    placed at the next boundary; num_steps=5 with one step per call: the engine is still recording
    when the next capture begins, so it is stopped then (said in the notes)."""
    engine, prof = setup(tmp_path, sglang)
    handle = attach_engine(prof, engine, num_steps=2)
    prof.start()
    with prof.stage("actor_generate"):
        engine.generate("a")
        engine.generate("b")
    prof.step()
    assert sglang.bound.calls_to(STOP) == [] and len(handle.captures) == 2
    assert sglang.bound.calls_to(START)[0]["kwargs"]["num_steps"] == 2
    assert any("SGLang stopped by itself after 2 forward steps" in n for n in handle.captures[0]["notes"])
    handle.detach()
    prof.stop()
    engine, prof = setup(tmp_path / "long", sglang)
    handle = attach_engine(prof, engine, num_steps=5)
    run(prof, 2, engine)
    assert len(sglang.bound.calls_to(STOP)) == 2 and [m["status"] for m in handle.captures] == ["ok"] * 4
    assert any("had not stopped by itself" in n for n in handle.captures[0]["notes"])


def test_a_server_url_with_a_profile_req_body(tmp_path, sglang):
    cfg = profile_config(tmp_path, backend="markers", stage="actor_generate", profile_step_start=1, profile_step_end=2,
                         profile_with_memory=True, profile_with_flops=True)
    with sglang.server(enable_metrics=True) as srv:
        prof = IntegratedProfiler(cfg, role="rollout", rank=0, world_size=1)
        handle = attach_engine(prof, srv.url, replica=0, tp_rank=0)
        run(prof, 1)
    path, body = srv.requests[0]
    assert path == "/start_profile" and body["activities"] == ["CPU", "GPU", "MEM"]
    assert [m["status"] for m in handle.captures] == ["ok", "ok"], handle.captures[0]["errors"]
    notes = " ".join(handle.captures[0]["notes"])
    assert "profile_with_flops: true is not honoured: SGLang's ProfileReq has no with_flops" in notes
    assert "passed as activity MEM" in notes


def test_a_refused_request_is_a_failed_capture(tmp_path, sglang, runtime_warnings):
    engine, prof = setup(tmp_path, sglang)
    engine.start_profile(output_dir=str(tmp_path / "by-hand"))   # someone else's session runs: ours is refused
    handle = attach_engine(prof, engine)
    run(prof, 1, engine)
    engine.stop_profile()   # the one by hand: its recording ends, our training never stopped it
    assert [m["status"] for m in handle.captures] == ["failed"]
    assert "already in progress" in handle.captures[0]["errors"][0]["error"]
    assert runtime_warnings("start_profile failed")


def test_ascend_directories_become_our_captures(tmp_path):
    """SGLang on Ascend writes torch_npu's `<host>_<pid>_<time>_ascend_pt` directories, no ranks in
    their names: each becomes one of our ascend_pt captures, told apart by its pid."""
    raw = tmp_path / "raw"
    for pid in (4242, 4243):
        (raw / f"node-1_{pid}_20261204094411941_ascend_pt" / "FRAMEWORK").mkdir(parents=True)
    meta = {"notes": [], "options": {"engine": {"name": "sglang"}}, "errors": [], "status": "ok"}
    session = Session(engine="sglang", save_dir=tmp_path / "actor_generate", role="actor-sglang", rank=5, iteration=3,
                      call=1, host="node-1", prefix="p", raw_dir=raw, meta=meta)
    metas = place(session, sorted(raw.iterdir()), worker_of, [])
    names = sorted(m["directory"].rsplit("/", 1)[1] for m in metas)
    parsed = [formats.parse_capture_dir_name(n) for n in names]
    assert [(p["role"], p["rank"], p["first"], p["format"]) for p in parsed] == [
        ("actor-sglang-pid4242", 5, 3, "ascend"), ("actor-sglang-pid4243", 5, 3, "ascend")]
    assert all((tmp_path / "actor_generate" / n / "FRAMEWORK").is_dir() for n in names)
    assert json.loads((tmp_path / "actor_generate" / names[0] / formats.META_FILE).read_text())["trace_files"] == []
    assert not any(raw.iterdir())


def test_no_output_is_a_failed_capture_saying_why(tmp_path):
    meta = {"notes": [], "options": {"engine": {"name": "vllm"}}, "errors": [], "status": "ok"}
    session = Session(engine="vllm", save_dir=tmp_path / "actor_generate", role="actor-vllm", rank=0, iteration=1,
                      call=1, host="h", prefix="p", raw_dir=tmp_path / "engine", meta=meta)
    (m,) = place(session, [], worker_of, [])
    assert m["status"] == "failed" and "no trace of this engine session" in m["errors"][0]["error"]
