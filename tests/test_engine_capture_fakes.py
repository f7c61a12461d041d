"""The fake vLLM and SGLang (tests/fake_vllm.py, tests/fake_sglang.py) against the signature
snapshots of the real releases (mindspeed_profiler/data/vllm-0.33.0.json, sglang-0.5.23.json, read
from their wheels' sources), as tests/test_npu_versions.py checks fake_torch_npu: every method the
adapters call has exactly the snapshot's parameters, the fields the fakes accept are the recorded
classes' fields, and what our adapters send (engine_profiler_args, ProfileReq bodies, trace names)
is what the snapshot says the engines take and write.
"""
from __future__ import annotations

import re

import pytest

import fake_sglang
import fake_vllm
from fake_engine_base import class_fields, same_signature
from profiler_testutil import profile_config
from mindspeed_profiler.engines import sglang_engine, vllm_engine
from mindspeed_profiler.engines.attach import engine_profiler_args

VLLM_METHODS = {  # the fake's attribute -> the real method recorded in the snapshot
    ("LLM", "__init__"): "vllm.entrypoints.llm.LLM.__init__",
    ("LLM", "start_profile"): "vllm.entrypoints.llm.LLM.start_profile",
    ("LLM", "stop_profile"): "vllm.entrypoints.llm.LLM.stop_profile",
    ("LLM", "generate"): "vllm.entrypoints.llm.LLM.generate",
    ("AsyncLLM", "start_profile"): "vllm.v1.engine.async_llm.AsyncLLM.start_profile",
    ("AsyncLLM", "stop_profile"): "vllm.v1.engine.async_llm.AsyncLLM.stop_profile",
}
SGLANG_METHODS = {
    ("Engine", "__init__"): "sglang.srt.entrypoints.engine.Engine.__init__",
    ("Engine", "start_profile"): "sglang.srt.entrypoints.engine.Engine.start_profile",
    ("Engine", "stop_profile"): "sglang.srt.entrypoints.engine.Engine.stop_profile",
    ("Engine", "generate"): "sglang.srt.entrypoints.engine.Engine.generate",
}


@pytest.mark.parametrize("fake_cls, methods, snap", [(fake_vllm.FakeVllm, VLLM_METHODS, fake_vllm.SNAPSHOT),
                                                     (fake_sglang.FakeSglang, SGLANG_METHODS, fake_sglang.SNAPSHOT)])
def test_the_fakes_have_the_real_signatures(fake_cls, methods, snap):
    fake = fake_cls()
    for (cls, meth), qualname in methods.items():
        fn = getattr(getattr(fake, cls), meth)
        entry = snap["functions"][qualname]
        assert same_signature(fn, entry), (qualname, fn.__signature__)
        assert fn.__qualname__ == qualname
        # a coroutine where the release has one (AsyncLLM's), a plain method elsewhere
        assert (fn.__code__.co_flags & 0x80 != 0) == bool(entry.get("async")), qualname


def test_the_fakes_refuse_what_the_release_refuses(tmp_path):
    fake = fake_vllm.FakeVllm()
    with pytest.raises(TypeError, match="start_profile"):
        fake.LLM("m").start_profile("p", 3)   # delay_iterations is keyword-only in 0.33.0
    with pytest.raises(ValueError, match="extra fields"):
        fake.LLM("m", profiler_config={"profiler": "torch", "torch_profiler_dir": str(tmp_path), "level": 1})
    with pytest.raises(ValueError, match="torch_profiler_dir"):
        fake.LLM("m", profiler_config={"profiler": "torch"})
    with pytest.raises(RuntimeError, match="not enabled"):
        fake.LLM("m").start_profile()
    eng = fake_sglang.FakeSglang().Engine()
    with pytest.raises(TypeError, match="ProfileReq"):
        eng.start_profile(output_dir=str(tmp_path), level="level1")
    with pytest.raises(RuntimeError, match="not in progress"):
        eng.stop_profile()


def test_fake_fields_are_the_snapshot_classes():
    assert fake_vllm.PROFILER_FIELDS == class_fields(fake_vllm.SNAPSHOT, "vllm.config.profiler.ProfilerConfig")
    assert set(fake_vllm.START_BODY_FIELDS) == {"profile_prefix", "delay_iterations", "max_iterations", "profiler_kwargs"}
    req = class_fields(fake_sglang.SNAPSHOT, "sglang.srt.managers.io_struct.ProfileReq")
    assert set(fake_sglang.PROFILE_REQ_FIELDS) == set(req) - {"rid", "http_worker_ipc", "req_type"}
    assert {"output_dir", "num_steps", "activities", "profile_by_stage", "with_stack", "record_shapes"} <= set(req)


def test_what_we_send_is_what_the_engines_take(tmp_path):
    """engine_profiler_args' profiler_config only has ProfilerConfig fields (it refuses others), the
    SGLang request only ProfileReq fields, the SGLang environment only recorded variables, and
    enable_metrics / disable_log_stats are the recorded fields."""
    cfg = profile_config(tmp_path, profile_level="level2", profile_with_memory=True)
    vargs = engine_profiler_args(cfg, engine="vllm")
    assert set(vargs["kwargs"]["profiler_config"]) <= set(fake_vllm.PROFILER_FIELDS)
    assert set(engine_profiler_args(cfg, engine="vllm-ascend")["kwargs"]["profiler_config"]) <= set(fake_vllm.PROFILER_FIELDS)
    engine_args = class_fields(fake_vllm.SNAPSHOT, "vllm.engine.arg_utils.EngineArgs")
    assert set(vargs["kwargs"]) <= set(engine_args)
    sargs = engine_profiler_args(cfg, engine="sglang")
    assert set(sargs["env"]) <= set(fake_sglang.SNAPSHOT["env_vars"])
    observability = class_fields(fake_sglang.SNAPSHOT, "sglang.srt.arg_groups.fields.observability.Observability")
    assert set(sargs["kwargs"]) <= set(observability)
    body = sglang_engine.request_body(cfg.integrated, profile_by_stage=True)
    assert set(body) | {"output_dir", "num_steps"} <= set(fake_sglang.PROFILE_REQ_FIELDS)
    assert set(body["activities"]) <= set(fake_sglang.ACTIVITIES)
    kwargs = vllm_engine.session_options(cfg.integrated)
    assert set(kwargs) <= set(fake_vllm.START_BODY_FIELDS) | {"profile_prefix"}


def test_trace_names_follow_the_recorded_code():
    """The names our readers parse are the ones the snapshot's anchors show the engines write."""
    anchors = fake_vllm.SNAPSHOT["anchors"]
    assert 'f"dp{dp_rank}_pp{pp_rank}_tp{tp_rank}_dcp{dcp_rank}_ep{ep_rank}"' in anchors["trace_name.rank_suffix"]["text"]
    assert 'f"{suffix}_rank{global_rank}"' in anchors["trace_name.rank_suffix_global"]["text"]
    assert 'f"{profile_prefix}_{rank_suffix}"' in anchors["trace_name.worker"]["text"]
    assert ".async_llm" in anchors["trace_name.frontend"]["text"]
    w = vllm_engine.worker_of("pre_dp1_pp0_tp3_dcp0_ep0_rank7.1764835200123456789.pt.trace.json.gz")
    assert (w.rank, dict(w.identity)) == (7, {"dp": 1, "pp": 0, "tp": 3, "dcp": 0, "ep": 0, "rank": 7})
    assert vllm_engine.worker_of("pre_dp0_pp0_tp0_dcp0_ep0_rank0.profiler_out.txt").rank == 0
    assert vllm_engine.worker_of("pre_host_12.async_llm.17648.pt.trace.json.gz").role_suffix == "-frontend"
    assert vllm_engine.worker_of("something.json") is None
    s = fake_sglang.SNAPSHOT["anchors"]
    assert 'f"TP-{get_parallel().tp_rank}"' in s["trace_name.parts"]["text"]
    assert all(re.search(p, s[k]["text"]) for k, p in (("trace_name.dp", "DP-"), ("trace_name.pp", "PP-"),
                                                        ("trace_name.ep", "EP-"), ("trace_name.extension", r"\.trace\.json\.gz")))
    w = sglang_engine.worker_of("1764835200.5-TP-2-DP-1-DECODE.trace.json.gz")
    assert (w.rank, w.role_suffix, dict(w.identity)) == (2, "-dp1-decode", {"tp": 2, "dp": 1})
    assert sglang_engine.worker_of("1764835200.5-TP-0.trace.json.gz").role_suffix == ""
    assert sglang_engine.worker_of("host_4242_20261204094411941_ascend_pt").role_suffix == "-pid4242"
