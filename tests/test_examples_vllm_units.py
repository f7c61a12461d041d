"""The vLLM rollout's pure pieces (examples/common/vllm_rollout.py, weight_sync.py): one request per
sample (the long tail's ignore the end token), the batch made of RequestOutputs, the settings'
checks on the driver, the sync's tracker row. No engine here (tests/test_examples_vllm_rollout.py
runs the real one)."""
from __future__ import annotations

import types

import pytest
import torch

from examples.common import generation, task, vllm_rollout, weight_sync

GRPO = {"model": {"layers": 2, "hidden": 64, "heads": 4, "lr": 0.003}, "rollout": "vllm",
        "vllm": {"placement": "engine_process", "max_num_seqs": 8, "kv_cache_gb": 1,
                 "model": {"arch": "qwen2", "hidden": 64, "heads": 2, "query_groups": 1, "ffn_hidden": 128}}}


def test_one_request_per_sample_the_long_tail_never_sampling_the_end():
    prompts = task.make_prompts(4, 6, torch.Generator().manual_seed(0))
    how = generation.plan(4, 10, long_tail_every=2, long_tail_tokens=30)
    reqs = vllm_rollout.sample_requests(prompts, how, 0.7)
    assert [ids for ids, _ in reqs] == prompts.tolist()
    assert [p["max_tokens"] for _, p in reqs] == [30, 10, 30, 10]
    tail, plain = reqs[0][1], reqs[1][1]
    assert tail["ignore_eos"] and task.END not in tail["allowed_token_ids"] and len(tail["allowed_token_ids"]) == task.VOCAB
    assert plain["stop_token_ids"] == [task.END] and "ignore_eos" not in plain and plain["temperature"] == 0.7


def _output(tokens):
    return types.SimpleNamespace(outputs=[types.SimpleNamespace(token_ids=tokens)])


def test_the_batch_of_request_outputs_is_what_the_actor_would_generate():
    prompts = torch.tensor([[1, 2], [3, 4], [5, 6]])
    tokens, lengths = vllm_rollout.batch_of([_output([3, task.END]), _output([5, 6, 7, 8]), _output([])], prompts)
    assert lengths.tolist() == [2, 4, 0]
    assert tokens.tolist() == [[1, 2, 3, task.END, task.PAD, task.PAD], [3, 4, 5, 6, 7, 8],
                               [5, 6, task.PAD, task.PAD, task.PAD, task.PAD]]


@pytest.mark.parametrize("change, message", [
    ({"rollout": "sglang"}, "grpo.rollout='sglang' must be one of megatron, vllm"),
    ({"vllm": {"placement": "colocated"}}, "grpo.vllm.placement='colocated' must be one of engine_process, in_process"),
    ({"vllm": {"max_num_seqs": 0}}, "grpo.vllm.max_num_seqs=0 must be a whole number"),
    ({"vllm": {"kv_cache_gb": "1GB"}}, "grpo.vllm.kv_cache_gb='1GB' must be a number of GB"),
    ({"vllm": {"model": {"arch": "gpt"}}}, "needs grpo.vllm.model.arch=qwen2"),
    ({"vllm": {"model": {"arch": "qwen2", "hidden": 64, "heads": 4}}}, "hidden / heads = 64 / 4: vLLM's CPU attention"),
])
def test_bad_rollout_settings_are_refused_on_the_driver_naming_the_key(change, message):
    settings = {**GRPO, **{k: v for k, v in change.items() if k != "vllm"}}
    if "vllm" in change:
        settings["vllm"] = {**GRPO["vllm"], **change["vllm"]}
    problems = vllm_rollout.check_rollout(settings, "grpo")
    assert any(message in p for p in problems), problems


def test_the_default_rollout_needs_nothing_and_vllm_missing_names_the_way_out(monkeypatch):
    assert vllm_rollout.check_rollout({"model": {}}, "grpo") == []
    assert vllm_rollout.check_rollout(GRPO, "grpo") == []   # vLLM is installed here (the engines extra)
    monkeypatch.setattr(vllm_rollout.importlib.util, "find_spec", lambda name: None)
    [problem] = vllm_rollout.check_rollout(GRPO, "grpo")
    assert "vLLM is not installed" in problem and "grpo.rollout=megatron" in problem


def test_the_workers_model_is_the_vllm_model_over_the_default():
    assert vllm_rollout.worker_model(GRPO) == {"layers": 2, "hidden": 64, "heads": 2, "lr": 0.003, "arch": "qwen2",
                                               "query_groups": 1, "ffn_hidden": 128}
    assert vllm_rollout.worker_model({**GRPO, "rollout": "megatron"}) == GRPO["model"]


def test_the_syncs_tracker_row_in_phase_order_and_its_sum():
    row = weight_sync.timing_row({"load": (5.0, 5.5), "gather": (1.0, 1.25), "transfer": (2.0, 3.0), "convert": (1.25, 1.5)})
    assert list(row) == ["timing_s/weight_sync_gather", "timing_s/weight_sync_convert", "timing_s/weight_sync_transfer",
                         "timing_s/weight_sync_load", "timing_s/weight_sync"]
    assert row["timing_s/weight_sync"] == pytest.approx(0.25 + 0.25 + 1.0 + 0.5)


def test_the_blob_round_trips_the_weights():
    weights = {"a": torch.randn(3, 4), "b": torch.arange(5.0)[::2]}   # a non-contiguous view too
    back = weight_sync.from_blob(weight_sync.to_blob(weights))
    assert set(back) == {"a", "b"} and all(torch.equal(back[k], weights[k]) for k in weights)
