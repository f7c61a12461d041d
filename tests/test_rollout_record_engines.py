"""record_samples on vLLM 0.33 RequestOutputs and SGLang 0.5.23 result dicts, and the checks of
each sample's values.

vLLM and SGLang need a GPU and cannot run here: the inputs are fakes built from the recorded
snapshots (tests/rollout_record_fakes.py: classes with exactly the recorded fields of
RequestOutput, CompletionOutput, RequestStateStats; meta_info keys from SGLang's sources). The
clocks of the recorder are pinned, so each converted time is compared with a hand computation.
"""
from __future__ import annotations

import json
import math
import re
import types
from pathlib import Path

import pytest

from rollout_record_fakes import (
    META_INFO_KEYS, VLLM, RequestOutput, RequestStateStats, completion, request_output, sglang_result,
)
from mindspeed_profiler import IntegratedProfiler, load_config
from mindspeed_profiler.rollout import engines, pull, recorder

WALL_NS = 1_790_000_000_000_000_000   # time.time_ns() at the call (pinned)
MONO = 5_000.0                         # time.monotonic() at the call
PERF = 700.0                           # time.perf_counter() at the call
NOW = WALL_NS / 1e9
MONO_OFFSET = NOW - MONO


@pytest.fixture
def pinned(monkeypatch):
    monkeypatch.setattr(recorder, "time", types.SimpleNamespace(time_ns=lambda: WALL_NS, monotonic=lambda: MONO,
                                                                perf_counter=lambda: PERF))


@pytest.fixture
def prof(tmp_path, clean_state, pinned):
    cfg = load_config({"integrated": {"profile": False, "profile_save_path": str(tmp_path)}, "metrics": {"enable": True}})
    p = IntegratedProfiler(cfg, role="actor", rank=0, world_size=1)
    p.start()
    yield p
    p.stop()


def lines_of(tmp_path: Path) -> list[dict]:
    return [json.loads(x) for x in (tmp_path / "samples" / "actor_rank0.jsonl").read_text().splitlines()]


def ns(seconds: float) -> int:
    return int(round(seconds * 1e9))


def test_vllm_metrics_are_converted_from_engine_monotonic_to_wall(prof, tmp_path):
    m = RequestStateStats(arrival_time=NOW - 3.0, queued_ts=MONO - 2.9, scheduled_ts=MONO - 2.5,
                          first_token_ts=MONO - 2.0, last_token_ts=MONO - 0.5)
    out = request_output("req-7", n_prompt=12, outputs=[completion(0, 300, "length")], metrics=m)
    assert prof.record_samples([out]) == 1
    prof.stop()
    batch, sample = lines_of(tmp_path)
    assert batch["source"] == "vllm" and batch["clock"] == engines.CLOCK_VLLM and batch["problems"] == []
    assert sample["id"] == "req-7" and sample["prompt_tokens"] == 12 and sample["response_tokens"] == 300
    assert sample["start_ns"] == ns(NOW - 3.0)                            # arrival_time: wall already
    assert sample["first_token_ns"] == ns(MONO - 2.0 + MONO_OFFSET)       # monotonic + (wall - monotonic)
    assert sample["end_ns"] == ns(MONO - 0.5 + MONO_OFFSET)
    assert sample["queue_s"] == pytest.approx(0.4) and sample["prefill_s"] == pytest.approx(0.5)
    assert sample["decode_s"] == pytest.approx(1.5)
    assert sample["finish_reason"] == "length" and sample["truncated"] is True and sample["problem"] is None


def test_vllm_without_metrics_gives_tokens_and_one_problem_line(prof, tmp_path):
    outs = [request_output(f"r{i}", outputs=[completion(0, 5 + i, "stop")]) for i in range(3)]
    prof.record_samples(outs)
    prof.stop()
    batch, *samples = lines_of(tmp_path)
    assert batch["clock"] == engines.CLOCK_NONE and batch["samples"] == 3
    assert batch["problems"] == [engines.NO_METRICS + " (3 of 3 requests)"]
    assert [s["response_tokens"] for s in samples] == [5, 6, 7]
    assert all(s["start_ns"] is None and s["end_ns"] is None and s["problem"] is None for s in samples)


def test_vllm_n_outputs_per_request_are_one_sample_each(prof, tmp_path):
    out = request_output("q", outputs=[completion(0, 3), completion(1, 9, "length")])
    assert prof.record_samples([out]) == 1   # one item taken ...
    prof.stop()
    batch, a, b = lines_of(tmp_path)
    assert batch["samples"] == 2             # ... two samples written
    assert (a["id"], b["id"]) == ("q/0", "q/1") and (a["response_tokens"], b["response_tokens"]) == (3, 9)


def test_vllm_unset_engine_times_are_a_problem_not_an_error(prof, tmp_path):
    # an aborted request: vLLM leaves first_token_ts / last_token_ts at their default 0.0
    m = RequestStateStats(arrival_time=NOW - 1.0, queued_ts=MONO - 0.9)
    prof.record_samples([request_output("a", outputs=[completion(0, 0, "abort")], metrics=m)])
    prof.stop()
    sample = lines_of(tmp_path)[1]
    assert sample["first_token_ns"] is None and sample["end_ns"] is None and sample["start_ns"] == ns(NOW - 1.0)
    assert sample["problem"] == "metrics.first_token_ts, metrics.last_token_ts not set"
    assert sample["prefill_s"] is None and sample["decode_s"] is None


def test_sglang_wall_clock_ts_keys(prof, tmp_path):
    res = sglang_result(id="s1", prompt_tokens=20, completion_tokens=64, cached_tokens=0,
                        finish_reason={"type": "stop", "matched": 2}, e2e_latency=2.0,
                        request_received_ts=NOW - 4.0, request_finished_ts=NOW - 2.0, first_token_latency=0.25,
                        queue_time=0.05, forward_entry_time=NOW - 3.9, prefill_finished_time=NOW - 3.7)
    prof.record_samples([res])
    prof.stop()
    batch, s = lines_of(tmp_path)
    assert batch["source"] == "sglang" and batch["clock"] == engines.CLOCK_SGLANG_TS
    assert (s["start_ns"], s["first_token_ns"], s["end_ns"]) == (ns(NOW - 4.0), ns(NOW - 4.0 + 0.25), ns(NOW - 2.0))
    assert s["queue_s"] == 0.05 and s["prefill_s"] == pytest.approx(0.2)
    assert s["decode_s"] == pytest.approx((NOW - 2.0) - (NOW - 4.0 + 0.25))
    assert s["finish_reason"] == "stop" and s["truncated"] is False and s["response_tokens"] == 64


def test_sglang_with_only_e2e_latency_ends_at_the_recording(prof, tmp_path):
    prof.record_samples([sglang_result(id=9, prompt_tokens=3, completion_tokens=100,
                                       finish_reason={"type": "length", "length": 100}, e2e_latency=1.5,
                                       weight_version="default")])
    prof.stop()
    batch, s = lines_of(tmp_path)
    assert batch["clock"] == engines.CLOCK_SGLANG_E2E
    assert s["end_ns"] == ns(NOW) and s["start_ns"] == ns(NOW - 1.5) and s["first_token_ns"] is None
    assert s["id"] == "9" and s["truncated"] is True and s["policy_version"] is None and s["problem"] is None


def test_inconsistent_and_junk_values_are_reported_per_sample(prof, tmp_path):
    items = [
        {"id": "back", "start": NOW - 1, "end": NOW - 2},                         # end before start
        {"id": "nan", "start": float("nan"), "end": NOW - 1},                     # NaN
        {"id": "junk", "prompt_tokens": "12", "response_tokens": -3, "start": [1], "queue_s": -0.5},
        {"id": "ft", "start": NOW - 3, "first_token": NOW - 0.5, "end": NOW - 1},  # first token after the end
        {"id": "mono", "start": 1234.5, "end": 1240.0},                           # monotonic given as wall
        {"id": "ok", "start": NOW - 3, "end": NOW - 1, "reward_s": 0.25, "policy_version": 4},
    ]
    assert prof.record_samples(items) == 6
    prof.stop()
    by_id = {s["id"]: s for s in lines_of(tmp_path)[1:]}
    assert by_id["back"]["start_ns"] is None and by_id["back"]["end_ns"] is None
    assert "end is 1 s before start" in by_id["back"]["problem"]
    assert by_id["nan"]["start_ns"] is None and by_id["nan"]["end_ns"] == ns(NOW - 1)
    assert "start: nan is not a finite number" in by_id["nan"]["problem"]
    junk = by_id["junk"]
    assert junk["prompt_tokens"] is None and junk["response_tokens"] is None and junk["start_ns"] is None
    assert junk["queue_s"] is None
    for field in ("prompt_tokens: '12' (str)", "response_tokens: -3 (int)", "start: [1] (list)", "queue_s: -0.5 s is negative"):
        assert field in junk["problem"]
    assert by_id["ft"]["first_token_ns"] is None and by_id["ft"]["end_ns"] == ns(NOW - 1)
    assert by_id["ft"]["problem"] == "first_token is outside [start, end]"
    assert by_id["mono"]["start_ns"] is None and "not a wall-clock time" in by_id["mono"]["problem"]
    assert by_id["ok"]["problem"] is None and by_id["ok"]["reward_s"] == 0.25 and by_id["ok"]["policy_version"] == 4
    assert all(not (isinstance(v, float) and math.isnan(v)) for s in by_id.values() for v in s.values())


def test_plain_dict_clocks_are_converted_with_the_offset_at_the_call(prof, tmp_path):
    item = {"id": 1, "start": MONO - 2.0, "first_token": MONO - 1.0, "end": MONO - 0.5}
    prof.record_samples([item], clock="monotonic")
    prof.record_samples([{"id": 2, "start": PERF - 2.0, "end": PERF}], clock="perf_counter")
    prof.stop()
    b1, s1, b2, s2 = lines_of(tmp_path)
    assert (b1["clock"], b2["clock"]) == (engines.CLOCK_MONOTONIC, engines.CLOCK_PERF)
    assert (s1["start_ns"], s1["first_token_ns"], s1["end_ns"]) == (
        ns(MONO - 2.0 + MONO_OFFSET), ns(MONO - 1.0 + MONO_OFFSET), ns(MONO - 0.5 + MONO_OFFSET))
    assert (s2["start_ns"], s2["end_ns"]) == (ns(PERF - 2.0 + NOW - PERF), ns(NOW))


def test_truncated_from_max_tokens_when_no_finish_reason(prof, tmp_path):
    prof.record_samples([{"id": "a", "response_tokens": 128, "max_tokens": 128},
                         {"id": "b", "response_tokens": 100, "max_tokens": 128}, {"id": "c", "response_tokens": 5}])
    prof.stop()
    assert [s["truncated"] for s in lines_of(tmp_path)[1:]] == [True, False, None]


def test_a_mixed_batch_is_one_batch_line_per_source_and_junk_items_are_problems(prof, tmp_path):
    items = [{"id": "d"}, request_output("v"), 17, sglang_result(id="s", e2e_latency=1.0), "text", object()]
    assert prof.record_samples(items) == 3
    prof.stop()
    lines = lines_of(tmp_path)
    batches = [x for x in lines if x["type"] == "batch"]
    assert [b["source"] for b in batches] == ["dict", "vllm", "sglang"]
    assert [b["samples"] for b in batches] == [1, 1, 1]
    assert batches[0]["problems"] == [
        "items[2]: int is not a vLLM RequestOutput, an SGLang result dict (with meta_info) or a sample dict: skipped",
        "items[4]: str is not a vLLM RequestOutput, an SGLang result dict (with meta_info) or a sample dict: skipped",
        "items[5]: object is not a vLLM RequestOutput, an SGLang result dict (with meta_info) or a sample dict: skipped"]
    assert [x["id"] for x in lines if x["type"] == "sample"] == ["d", "v", "s"]


def test_an_object_that_breaks_mid_read_is_skipped_with_its_reason(prof, tmp_path):
    class Broken:
        request_id, outputs = "b", None

        @property
        def metrics(self):
            raise RuntimeError("engine gone")

    assert prof.record_samples([request_output("fine"), Broken()]) == 1
    prof.stop()
    batch, sample = lines_of(tmp_path)
    assert sample["id"] == "fine"
    assert batch["problems"][0] == "items[1]: could not be read (RuntimeError: engine gone): skipped"


def test_the_fakes_follow_the_snapshot_and_reject_other_attributes():
    out = request_output("x")
    with pytest.raises(AttributeError):
        out.num_generation_tokens = 1    # not a RequestOutput attribute in vLLM 0.33
    with pytest.raises(TypeError):
        RequestOutput("x", None, [], None, [], True, None, bogus=1)
    with pytest.raises(AssertionError):
        sglang_result(prompt_tokens=1, time_to_first_token=0.1)


def test_extraction_reads_only_recorded_names():
    """The names pull.py and engines.py read are the recorded releases' names, exactly."""
    stats = {f["name"] for f in VLLM["classes"]["vllm.v1.metrics.stats.RequestStateStats"]["fields"]}
    assert set(pull.METRIC_FIELDS) <= stats
    source = Path(pull.__file__).read_text()
    completion_fields = {f["name"] for f in VLLM["classes"]["vllm.outputs.CompletionOutput"]["fields"]}
    assert set(re.findall(r"\bc\.(\w+)", source)) <= completion_fields
    attributes = set(VLLM["instance_attributes"]["vllm.outputs.RequestOutput"])
    assert set(re.findall(r"\bo\.(\w+)", source)) <= attributes
    assert set(re.findall(r"\bm\.(\w+)", source)) <= stats
    read = set(re.findall(r'meta\.get\("(\w+)"\)', Path(engines.__file__).read_text()))
    assert read and read <= META_INFO_KEYS


def test_the_bound_counts_outputs_not_requests(prof, tmp_path, monkeypatch):
    from mindspeed_profiler.core import formats

    monkeypatch.setattr(formats, "MAX_SAMPLES_PER_ITERATION", 5)
    outs = [request_output(f"r{i}", outputs=[completion(0), completion(1)]) for i in range(4)]   # 8 samples
    assert prof.record_samples(outs) == 4
    prof.stop()
    batch, *rest = lines_of(tmp_path)
    assert (batch["samples"], batch["dropped"], len(rest)) == (5, 3, 5)


def test_a_call_that_cannot_be_converted_is_one_warning_and_the_others_are_written(prof, tmp_path, monkeypatch,
                                                                                  runtime_warnings):
    def broken(raws, ctx):
        raise RuntimeError("converter bug")

    monkeypatch.setitem(engines.CONVERTERS, "sglang", broken)   # the recorder's table (the same dict)
    prof.record_samples([sglang_result(id="x", e2e_latency=1.0)])
    prof.record_samples([{"id": "kept"}])
    prof.stop()
    assert [x.get("id") for x in lines_of(tmp_path)] == [None, "kept"]
    assert runtime_warnings("could not be encoded and are dropped: RuntimeError: converter bug")


def test_vllm_metrics_of_the_wrong_type_are_reported(prof, tmp_path):
    m = RequestStateStats(arrival_time=NOW - 2.0, queued_ts=MONO - 1.9, scheduled_ts="soon",
                          first_token_ts=float("inf"), last_token_ts=MONO - 1.0)
    prof.record_samples([request_output("w", metrics=m)])
    prof.stop()
    s = lines_of(tmp_path)[1]
    assert s["first_token_ns"] is None and s["queue_s"] is None and s["prefill_s"] is None and s["decode_s"] is None
    assert s["start_ns"] == ns(NOW - 2.0) and s["end_ns"] == ns(MONO - 1.0 + MONO_OFFSET)
    assert s["problem"] == ("metrics.scheduled_ts: 'soon' (str) is not a number; "
                            "metrics.first_token_ts: inf is not a finite number")


def test_what_the_recorder_writes_the_reader_reads_without_a_problem(prof, tmp_path):
    """The writer against the analysis' reader (analysis/parsing/samples.py, another module's)."""
    from mindspeed_profiler.analysis.parsing.samples import read_samples

    m = RequestStateStats(arrival_time=NOW - 3.0, queued_ts=MONO - 2.9, scheduled_ts=MONO - 2.8,
                          first_token_ts=MONO - 2.5, last_token_ts=MONO - 1.0)
    prof.record_samples([request_output("a", metrics=m), request_output("b", outputs=[completion(0), completion(1)])])
    prof.record_samples([sglang_result(id="s", e2e_latency=1.0, completion_tokens=5, finish_reason={"type": "length"}),
                         {"id": "bad", "start": NOW - 1, "end": NOW - 5}, 42])
    prof.stop()
    read = read_samples(tmp_path / "samples" / "actor_rank0.jsonl")
    assert read.problems == []
    assert [b.source for b in read.batches] == ["vllm", "sglang", "dict"]
    assert [s.id for s in read.samples] == ["a", "b/0", "b/1", "s", "bad"]
    assert read.samples[0].first_token_ns == ns(MONO - 2.5 + MONO_OFFSET)
    assert read.samples[-1].problem == "end is 4 s before start"


def test_numbers_of_numpy_and_torch_are_taken(prof, tmp_path):
    np = pytest.importorskip("numpy")
    torch = pytest.importorskip("torch")
    prof.record_samples([{"id": np.int64(3), "prompt_tokens": np.int32(5), "response_tokens": torch.tensor(64),
                          "start": np.float64(NOW - 2), "end": torch.tensor(NOW - 1, dtype=torch.float64),
                          "max_tokens": np.int64(64), "policy_version": torch.tensor(2), "reward_s": np.float32(0.5)},
                         {"id": "many", "response_tokens": torch.tensor([1, 2]), "start": torch.tensor([1.0, 2.0])}])
    prof.stop()
    a, b = lines_of(tmp_path)[1:]
    assert (a["id"], a["prompt_tokens"], a["response_tokens"], a["policy_version"]) == ("3", 5, 64, 2)
    assert (a["start_ns"], a["end_ns"], a["truncated"], a["reward_s"], a["problem"]) == (ns(NOW - 2), ns(NOW - 1), True,
                                                                                         0.5, None)
    assert b["response_tokens"] is None and b["start_ns"] is None
    assert "response_tokens: tensor([1, 2]) (Tensor) is not a token count" in b["problem"]
    assert "start: tensor([1., 2.]) (Tensor) is not a number" in b["problem"]
