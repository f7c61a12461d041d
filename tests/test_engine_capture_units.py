"""The pure pieces of the engine captures (engines/: attach.py, outputs.py,
notes.py, vllm_engine.py, sglang_engine.py, calls.py): the selection decision, session
prefixes, grouping outputs by worker, the notes for what each engine cannot honour, settling a
coroutine, a POST's errors. No engine (and no fake) is needed here.
"""
from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from fake_engine_base import FakeServer
from profiler_testutil import profile_config
from mindspeed_profiler.capture.schedule import make_plan
from mindspeed_profiler.engines import sglang_engine, vllm_engine
from mindspeed_profiler.engines.calls import is_pending, post_json, settle
from mindspeed_profiler.engines.outputs import UNKNOWN, group_outputs
from mindspeed_profiler.engines.attach import engine_kind
from mindspeed_profiler.engines.capture import call_selected, session_prefix


def test_call_selected_is_the_plans_decision():
    staged = make_plan([2, 3], stages=["actor_generate"])
    assert [call_selected(staged, "actor_generate", it) for it in (1, 2, 3, 4)] == [False, True, True, False]
    assert not call_selected(staged, "actor_update", 2)
    whole = make_plan([2])
    assert [call_selected(whole, "actor_generate", it) for it in (1, 2, 3)] == [False, True, False]


def test_session_prefix_is_safe_and_bounded():
    assert session_prefix("actor.v2-vllm_rank0_step3-3_c2_77_20261204094411941") == \
        "actor-v2-vllm_rank0_step3-3_c2_77_20261204094411941"
    long = session_prefix("r" * 300)
    assert len(long) == 133 and long.startswith("r" * 120 + "-")
    assert session_prefix("r" * 300) == long and session_prefix("s" * 300) != long


def test_outputs_grouped_by_worker_side_files_kept_with_one():
    names = ["p_dp0_pp0_tp1_dcp0_ep0_rank1.5.pt.trace.json.gz", "p_dp0_pp0_tp0_dcp0_ep0_rank0.5.pt.trace.json.gz",
             "p_dp0_pp0_tp0_dcp0_ep0_rank0.profiler_out.txt", "p_stray.txt"]
    groups = group_outputs([Path(n) for n in names], vllm_engine.worker_of)
    assert [(w.key, [p.name for p in ps]) for w, ps in groups.items()] == [
        ("rank0", [names[1], names[2], names[3]]), ("rank1", [names[0]])]
    only = group_outputs([Path("x.txt")], vllm_engine.worker_of)
    assert list(only) == [UNKNOWN]
    mem = sglang_engine.worker_of("1764.5-TP-1-memory.pickle")
    assert mem == sglang_engine.worker_of("1764.5-TP-1.trace.json.gz")


def test_notes_name_every_option_the_engine_cannot_take(tmp_path):
    cfg = profile_config(tmp_path, profile_level="level_none", mstx=True, l2_cache=True, profile_export_type="db",
                         warmup_steps=1).integrated
    v = " | ".join(vllm_engine.notes(cfg, warmup_steps=cfg.warmup_steps))
    for words in ("level_none (annotations only) is not available in vLLM's torch.profiler", "mstx: true",
                  "l2_cache: true is not honoured by the vllm backend", "profile_export_type: db",
                  "warmup_steps: 1", "activities are set when the engine is built"):
        assert words in v, words
    s = " | ".join(sglang_engine.notes(profile_config(tmp_path, profile_with_module=True).integrated, num_steps=4))
    assert "profile_with_module: true is not honoured: SGLang's ProfileReq has no with_modules" in s
    assert "num_steps: 4: SGLang stopped by itself" in s
    a = " | ".join(vllm_engine.notes(profile_config(tmp_path, profile_with_memory=True).integrated, ascend=True))
    assert "profile_with_memory: true is not passed per capture" in a and "fixes torch_npu's Level1" in a
    # defaults: nothing to say beyond the activities (vLLM) / nothing (SGLang)
    plain = profile_config(tmp_path).integrated
    assert len(vllm_engine.notes(plain)) == 1 and sglang_engine.notes(plain) == []


def test_engine_kind():
    assert engine_kind("http://h:1") == "sglang" and engine_kind("http://h:1", "vllm") == "vllm"
    with pytest.raises(ValueError, match="allowed: vllm, vllm-ascend, sglang"):
        engine_kind(object(), "tgi")


def test_settle():
    async def value():
        return 7
    assert settle(5) == 5
    assert settle(value()) == 7   # no loop: asyncio.run
    with pytest.raises(TimeoutError):
        settle(asyncio.sleep(1), timeout_s=0.05)

    async def inside():
        task = settle(value())
        assert is_pending(task)
        return await task
    assert asyncio.run(inside()) == 7


def test_post_json_errors_name_the_url_and_status():
    with FakeServer({"/ok": lambda body: {"got": body}, "/bad": lambda body: 1 / 0}) as srv:
        assert post_json(srv.url, "/ok", {"a": 1}, 5) == {"got": {"a": 1}}
        with pytest.raises(RuntimeError, match=r"POST http://127\.0\.0\.1:\d+/bad: HTTP 400 .*ZeroDivisionError"):
            post_json(srv.url, "/bad", None, 5)
        with pytest.raises(RuntimeError, match="HTTP 404"):
            post_json(srv.url, "/nowhere", None, 5)
