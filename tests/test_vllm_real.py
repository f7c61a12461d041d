"""The engine support against the real vLLM (0.32.0, the CPU build the `engines` extra installs),
one engine for the module (~50 s to import and start on 2 cores). What the fakes could not show:

- defect 1: `engine_profiler_args` asked a CPU engine for CUDA activities: the engine refused to
  start (`Engine core initialization failed`); now its device's activities, and a note;
- defect 2: `start_profile(profiler_kwargs=...)` does not exist in 0.32: every capture failed with
  TypeError; now the options the engine's signature takes, and a note;
- defect 3: a dense model's traces are named `<prefix>_rank<R>.<ns>.pt.trace.json.gz`: they landed
  in one capture naming no worker; now placed by rank;
and the per-sample records from real `RequestOutput`s (their times equal a recomputation from
`RequestOutput.metrics`), an engine that queues (more requests than `max_num_seqs`: the
`engine_queueing` finding, its queue share equal to a recomputation), preemptions counted where
the engine reports them (a KV cache too small for the batch), and the analysis of it all."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from vllm_testutil import END, need_vllm, prompts, real_llm, tiny_qwen2
from mindspeed_profiler import IntegratedProfiler, load_config
from mindspeed_profiler.analysis.analyzers.long_tail import ROLLOUT_BATCHES
from mindspeed_profiler.analysis.parsing.samples import read_samples
from mindspeed_profiler.analysis.pipeline.batch import analyse_directory
from mindspeed_profiler.core import formats
from mindspeed_profiler.engines.attach import attach_engine, engine_profiler_args

pytestmark = pytest.mark.slow

MAX_SEQS = 4            # the engine's concurrency: a generate() of more requests queues
KV_BLOCKS = 8           # x 32 tokens (the CPU attention takes multiples of 32): 4 sequences of
                        # ~20 tokens fit, 4 of ~106 do not (some are preempted)


def config(save: Path, **integrated):
    return load_config({"integrated": {"profile": True, "profile_save_path": str(save), "backend": "markers",
                                       "stage": "actor_generate", "profile_step_start": 2, "profile_step_end": 3,
                                       "profile_level": "level1", **integrated}, "metrics": {"enable": True}})


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    need_vllm()
    root = tmp_path_factory.mktemp("vllm")
    model = tiny_qwen2(root / "model")
    cfg = config(root / "prof")
    args = engine_profiler_args(cfg, engine="vllm")
    with real_llm(model, max_num_seqs=MAX_SEQS, num_gpu_blocks_override=KV_BLOCKS, block_size=32,
                  **args["kwargs"]) as llm:
        yield cfg, args, llm


def generate(llm, n: int, max_tokens: int = 10, *, to_the_limit: bool = False):
    """`n` requests of up to `max_tokens` tokens each, stopping at END unless `to_the_limit`."""
    from vllm import SamplingParams

    stop = dict(ignore_eos=True) if to_the_limit else dict(stop_token_ids=[END])
    params = SamplingParams(max_tokens=max_tokens, temperature=1.0, **stop)
    return llm.generate(prompts(n), params, use_tqdm=False)


def test_defect1_a_cpu_engine_starts_with_our_args_and_records_cpu_only(engine):
    cfg, args, llm = engine   # the engine was built with them (before: 'Engine core initialization failed')
    assert args["kwargs"]["profiler_config"]["torch_profiler_activities"] == ["CPU"]
    assert llm.llm_engine.vllm_config.profiler_config.torch_profiler_activities == ["CPU"]
    assert any("device activity dropped" in n for n in args["notes"]), args["notes"]


def test_defects_2_and_3_captures_of_the_real_engine_placed_by_worker_and_analysed(engine):
    cfg, _, llm = engine
    save = Path(cfg.integrated.profile_save_path)
    prof = IntegratedProfiler(cfg, role="rollout", rank=0, world_size=1)
    handle = attach_engine(prof, llm)
    prof.start()
    for _ in range(3):
        with prof.stage("actor_generate"):
            outs = generate(llm, 8)
            prof.record_samples(outs, stage="actor_generate")
        prof.step()
    prof.stop()
    [meta] = handle.captures   # iteration 2 only (the window [2, 3))
    assert meta["status"] == "ok", meta["errors"]   # before: TypeError: unexpected keyword 'profiler_kwargs'
    assert (meta["role"], meta["rank"], meta["steps"]) == ("rollout-vllm", 0, [2, 2])
    assert meta["options"]["engine"]["worker"] == {"rank": 0}   # before: None, "names no worker"
    assert not any("names no worker" in n for n in meta["notes"])
    assert any("takes no profiler_kwargs" in n for n in meta["notes"]), meta["notes"]
    d = Path(meta["directory"])
    trace = next(f for f in meta["trace_files"] if f.endswith(".pt.trace.json.gz"))
    events = json.loads(gzip.open(d / trace).read())["traceEvents"]
    assert any(e.get("cat") == "cpu_op" for e in events)   # the engine worker's ops, recorded by vLLM
    assert any(f.endswith(".profiler_out.txt") for f in meta["trace_files"])   # its side file, kept with it
    assert not list((save / "engine" / "vllm").iterdir())   # every output placed
    summary, _ = analyse_directory(save, jobs=1, progress=False, html=False, write=False)
    [cap] = [c for c in summary["captures"] if c.get("role") == "rollout-vllm"]
    assert (cap["rank"], tuple(cap["step_range"]), cap["kind"], cap.get("error")) == (0, (2, 2), "torch", None)


def test_a_tensor_parallel_dense_models_names_are_two_workers():
    """Defect 3 on the names a TP=2 dense engine writes (the real engine here has one worker; the
    names are get_worker_rank_suffix's fallback, checked against the installed source in
    tests/test_engine_installed.py): two ranks, never merged."""
    from mindspeed_profiler.engines.outputs import group_outputs
    from mindspeed_profiler.engines.vllm_engine import worker_of

    pre = "rollout-vllm_rank0_step2-2_c1_host_123_20261207"
    names = [f"{pre}_rank0.1796679496450155476.pt.trace.json.gz", f"{pre}_rank1.1796679496450155999.pt.trace.json.gz",
             f"{pre}_rank0.profiler_out.txt", f"{pre}_rank1.profiler_out.txt"]
    groups = group_outputs([Path(n) for n in names], worker_of)
    assert {w.rank: sorted(p.name for p in ps) for w, ps in groups.items()} == {
        0: sorted(names[0::2]), 1: sorted(names[1::2])}


def _metrics_by_id(outs):
    return {o.request_id: o.metrics for o in outs}


def test_samples_from_real_request_outputs_equal_their_metrics(engine, tmp_path):
    cfg = config(tmp_path)
    prof = IntegratedProfiler(cfg, role="rollout", rank=0, world_size=1)
    prof.start()
    outs = generate(engine[2], 6)
    prof.record_samples(outs, stage="actor_generate")
    prof.stop()
    [path] = (tmp_path / formats.SAMPLES_DIR).glob("*.jsonl")
    got = read_samples(path)
    assert [b.source for b in got.batches] == ["vllm"] and not got.batches[0].problems
    want = _metrics_by_id(outs)
    assert sorted(s.id for s in got.samples) == sorted(want)
    for s in got.samples:
        m = want[s.id]
        assert s.start_ns == round(m.arrival_time * 1e9)                      # wall clock as given
        # the engine's monotonic times moved by one offset: their differences are the engine's
        assert (s.end_ns - s.first_token_ns) / 1e9 == pytest.approx(m.last_token_ts - m.first_token_ts, abs=2e-6)
        assert s.queue_s == pytest.approx(m.scheduled_ts - m.queued_ts, abs=1e-9)
        assert s.prefill_s == pytest.approx(m.first_token_ts - m.scheduled_ts, abs=1e-9)
        assert s.response_tokens == m.num_generation_tokens and s.problem is None


def test_an_engine_that_queues_gives_the_finding_and_its_share_from_the_metrics(engine, tmp_path):
    cfg = config(tmp_path)
    prof = IntegratedProfiler(cfg, role="rollout", rank=0, world_size=1)
    prof.start()
    outs = generate(engine[2], 4 * MAX_SEQS, max_tokens=12, to_the_limit=True)   # 4 waves of MAX_SEQS
    prof.record_samples(outs, stage="actor_generate")
    prof.stop()
    queued = [o.metrics.scheduled_ts - o.metrics.queued_ts for o in outs]
    # latency = end - start: the last token (engine monotonic) against the arrival (wall clock)
    [path] = (tmp_path / formats.SAMPLES_DIR).glob("*.jsonl")
    ends = {s.id: s for s in read_samples(path).samples}
    latency = [(ends[o.request_id].end_ns - ends[o.request_id].start_ns) / 1e9 for o in outs]
    share = sum(queued) / sum(latency)
    summary, _ = analyse_directory(tmp_path, jobs=1, progress=False, html=False, write=False)
    [row] = ROLLOUT_BATCHES.rows(summary)
    assert row["queue_known"] == len(outs)
    assert row["queue_share"] == pytest.approx(share, rel=1e-6)
    assert share > 0.2   # 3 of 4 waves wait for the ones before them
    assert "engine_queueing" in [f["id"] for f in summary["findings"]]


def test_preemptions_are_counted_where_the_engine_reports_them(engine, tmp_path):
    """A KV cache of KV_BLOCKS blocks cannot hold MAX_SEQS sequences of ~100 tokens: vLLM preempts
    (recomputes) some; RequestStateStats.num_preemptions says how often, and so do the records."""
    cfg = config(tmp_path)
    prof = IntegratedProfiler(cfg, role="rollout", rank=0, world_size=1)
    prof.start()
    outs = generate(engine[2], MAX_SEQS, max_tokens=100, to_the_limit=True)
    prof.record_samples(outs, stage="actor_generate")
    prof.stop()
    want = {o.request_id: o.metrics.num_preemptions for o in outs}
    assert sum(want.values()) > 0, want
    [path] = (tmp_path / formats.SAMPLES_DIR).glob("*.jsonl")
    assert {s.id: s.preemptions for s in read_samples(path).samples} == want
