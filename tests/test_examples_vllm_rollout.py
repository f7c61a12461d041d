"""The examples' rollout on a real vLLM engine (`grpo.rollout=vllm`, examples/common/vllm_rollout.py;
vLLM's CPU build from the `engines` extra), end to end on a local Ray cluster:

- the conversion is right: after each of 3 syncs (an update of the Megatron actor, then gather,
  convert, transfer, load), the engine's log-probabilities of 8 fixed prompt + response sequences
  equal the Megatron policy's within 1e-4 per token (float32), and the engine's greedy
  continuations are the policy's most likely tokens;
- GRPO with the engine in its own processes (verl's way) and the long-tail knob: the engine's own
  captures placed by worker, the samples from its RequestOutputs, the weight sync's phases on the
  timeline and in the driver's metrics, the long-tail finding equal to a recomputation from the raw
  sample records, everything analysed;
- GRPO async with the engine inside the rollout worker (MindSpeed-RL's way) and fewer engine slots
  than samples: our own capture holds vLLM's ops, the convert phase in the async rows, the
  engine_queueing finding with its share equal to a recomputation from the records;
- DPO with the vLLM rollout.
Slow: each run starts Ray and a vLLM engine (~1 min on 2 quiet cores)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from test_examples_e2e import _captures, _run, _sample_lines
from test_long_tail import recompute   # docs/rollout.md's long-tail definitions on the raw JSON lines
from vllm_testutil import need_vllm

pytestmark = pytest.mark.slow

LOGPROB_TOL = 1e-4   # per token, float32: measured 2.4e-7 - 4.8e-7 over 3 syncs (vLLM's CPU kernels vs Megatron's local spec)


def _spans(save: Path) -> dict[tuple[str, str], list[dict]]:
    tl = json.loads((save / "timeline" / "timeline.json").read_text())
    names = {e["pid"]: e["args"]["name"] for e in tl["traceEvents"] if e.get("ph") == "M" and e.get("name") == "process_name"}
    out: dict[tuple[str, str], list[dict]] = {}
    for e in tl["traceEvents"]:
        if e.get("ph") == "X":
            out.setdefault((names.get(e["pid"], ""), e["name"]), []).append(e)
    return out


def test_the_engine_serves_the_actors_weights_after_each_of_three_syncs(tmp_path):
    need_vllm()
    import ray

    from examples.common import task, vllm_rollout
    from examples.common.trainer import RayCluster, split_overrides, worker_settings
    from examples.common.workers import GRPOActorWorker
    from mindspeed_profiler import load_config

    settings, _ = split_overrides(Path("examples/grpo/grpo.yaml"), "grpo", ["grpo.rollout=vllm", "grpo.sft_steps=0"])
    model = worker_settings(settings)
    cfg = load_config({"integrated": {"profile": False, "profile_save_path": str(tmp_path)}})
    gen = torch.Generator().manual_seed(3)
    prompts = task.make_prompts(8, settings["prompt_len"], gen)
    sequences = torch.cat([prompts, torch.randint(0, task.VOCAB_SIZE, (8, 10), generator=gen)], 1)
    with RayCluster(cfg, num_cpus=2) as cluster:
        actor = cluster.group(GRPOActorWorker, 1, model, seed=5)[0]
        rollout = cluster.group(vllm_rollout.VllmRolloutWorker, 1, model, seed=5)[0]
        vllm_rollout.start_engine(cluster, actor, rollout)
        for version in range(1, 4):
            # an update of the actor (random advantages: any change of the weights will do), then the sync
            n = sequences.shape[0]
            lengths = torch.full((n,), 10)
            old = cluster.get(actor.actor_log_prob.remote(sequences))
            cluster.get(actor.update.remote(sequences, lengths, old, old, torch.randn(n, generator=gen),
                                            settings["prompt_len"], 1))
            vllm_rollout.sync_weights(cluster, actor, rollout, version)
            ours = cluster.get(actor.actor_log_prob.remote(sequences))          # [8, T-1]: token j+1 given 0..j
            engine = torch.tensor(cluster.get(rollout.prompt_logprobs.remote(sequences.tolist())))
            assert engine.shape == ours.shape
            worst = float((engine - ours).abs().max())
            assert worst < LOGPROB_TOL, (version, worst)
            # greedy: the engine's continuation of each prompt is the actor's most likely token at each step
            cont = cluster.get(rollout.greedy.remote(prompts.tolist(), 6))
            full = torch.cat([prompts, torch.tensor(cont)], 1)
            best = cluster.get(actor.greedy_tokens.remote(full))[:, settings["prompt_len"] - 1:-1]
            assert torch.equal(best, torch.tensor(cont)), (version, best, cont)
            print(f"sync {version}: max |log p engine - log p Megatron| = {worst:.2e}")
        ray.get([h.shutdown.remote() for h in (actor, rollout)], timeout=120)


@pytest.fixture(scope="module")
def grpo_vllm(tmp_path_factory):
    """GRPO, 5 iterations, the engine in its own processes, the long-tail knob on, captures at 3."""
    need_vllm()
    save = tmp_path_factory.mktemp("grpo-vllm") / "prof"
    out = _run("examples.grpo.train_grpo", save.parent, "grpo.rollout=vllm", "grpo.iterations=5", "grpo.long_tail_every=8",
               f"profiler_config.integrated.profile_save_path={save}")
    return save, out


def test_grpo_on_vllm_engine_captures_placed_by_worker_and_analysed(grpo_vllm):
    save, out = grpo_vllm
    assert out.stdout.count("\niter ") == 5 and "rollout: vLLM 0.32" in out.stdout
    caps = _captures(save)
    gen = {(m["role"], m["rank"]): m for m in caps["actor_generate"]}
    assert set(gen) == {("rollout", 0), ("rollout-vllm", 0)}   # the worker's own capture and the engine's
    engine = gen[("rollout-vllm", 0)]
    assert engine["status"] == "ok" and engine["steps"] == [3, 3] and engine["options"]["engine"]["worker"] == {"rank": 0}
    assert any(f.endswith(".pt.trace.json.gz") for f in engine["trace_files"])
    assert sorted((m["role"], m["rank"]) for m in caps["actor_update"]) == [("actor", 0), ("actor", 1)]
    summary = json.loads((save / "analysis" / "summary.json").read_text())
    assert all(c["status"] == "ok" for c in summary["captures"]), [(c.get("role"), c["status"]) for c in summary["captures"]]
    [ours] = [c for c in summary["captures"] if c.get("role") == "rollout-vllm"]
    assert ours["stage"] == "actor_generate" and ours["kind"] == "torch"


def test_grpo_on_vllm_samples_are_the_engines_requests(grpo_vllm):
    save, _ = grpo_vllm
    [(who, lines)] = _sample_lines(save).items()
    assert who == ("rollout", 0) and len(lines) == 5 * 32
    batches = [json.loads(x) for x in (save / "samples" / "rollout_rank0.jsonl").read_text().splitlines()]
    assert {b["source"] for b in batches if b["type"] == "batch"} == {"vllm"}
    for r in lines:
        assert r["policy_version"] == r["iteration"] - 1   # the weights of the updates before it
        assert r["queue_s"] is not None and r["prefill_s"] is not None and r["preemptions"] == 0
    for it in range(1, 6):   # the knob: samples 0, 8, 16, 24 of each batch never sample END and run to 64 tokens
        lengths = sorted(r["response_tokens"] for r in lines if r["iteration"] == it)
        assert lengths[-4:] == [64] * 4 and lengths[-5] <= 10, (it, lengths)


def test_grpo_on_vllm_weight_sync_phases_on_the_timeline_and_in_the_metrics(grpo_vllm):
    save, _ = grpo_vllm
    rows = [json.loads(x) for x in (save / "metrics" / "driver_rank0.jsonl").read_text().splitlines()]
    assert [r["iteration"] for r in rows] == [1, 2, 3, 4, 5]
    spans = _spans(save)
    where = {"gather": "actor:0", "convert": "actor:0", "transfer": "rollout:0", "load": "rollout:0"}
    for phase, proc in where.items():
        drawn = {s["args"]["policy_version"]: s["dur"] / 1e6 for s in spans[(proc, f"weight_sync/{phase}")]}
        assert set(drawn) >= {1, 2, 3, 4, 5}, (phase, drawn)
        for r in rows:   # the driver's row and the span: one measurement, two clocks (10 ms)
            assert r[f"timing_s/weight_sync_{phase}"] == pytest.approx(drawn[r["iteration"]], abs=0.01), (phase, r)
    for r in rows:
        assert r["timing_s/weight_sync"] == pytest.approx(sum(r[f"timing_s/weight_sync_{p}"] for p in where))
        assert r["timing_s/weight_sync_load"] > 0 and r["timing_s/weight_sync_convert"] > 0


def test_grpo_on_vllm_long_tail_finding_equals_a_recomputation(grpo_vllm):
    save, _ = grpo_vllm
    summary = json.loads((save / "analysis" / "summary.json").read_text())
    [found] = [f for f in summary["findings"] if f["id"] == "long_tail_generation"]
    ev = found["evidence"]
    want = recompute(save / "samples")[(ev["iteration"], "actor_generate")]
    assert want["timed"] == ev["samples"] == 32
    assert ev["tail_lost_s"] == pytest.approx(want["tail_lost_s"], rel=1e-9)
    assert ev["mean_occupancy"] == pytest.approx(want["mean_occupancy"], rel=1e-9)
    assert ev["t50_s"] == pytest.approx(want["t50_s"]) and ev["t100_s"] == pytest.approx(want["t100_s"])


def test_grpo_async_with_vllm_in_process_queueing(tmp_path):
    """The engine inside the rollout worker (VLLM_ENABLE_V1_MULTIPROCESSING=0): our own capture of
    the generation holds vLLM's ops, there is no engine capture; 4 engine slots for 32 samples: the
    requests queue, and the finding's share is the records' sum(queue_s) / sum(end - start)."""
    need_vllm()
    save = tmp_path / "prof"
    _run("examples.grpo.train_grpo", tmp_path, "grpo.rollout=vllm", "grpo.mode=async", "grpo.iterations=4",
         "grpo.vllm.placement=in_process", "grpo.vllm.max_num_seqs=4",
         f"profiler_config.integrated.profile_save_path={save}")
    gen = _captures(save)["actor_generate"]
    assert [(m["role"], m["status"]) for m in gen] == [("rollout", "ok")]
    trace = next(f for f in gen[0]["trace_files"] if ".pt.trace.json" in f)
    directory = next(p for p in (save / "actor_generate").iterdir() if p.is_dir())
    import gzip
    raw = (gzip.open if trace.endswith(".gz") else open)(directory / trace, "rt").read()
    assert "vllm::unified_attention_with_output" in raw   # the engine's own ops, in our capture
    rows = [json.loads(x) for x in (save / "metrics" / "driver_rank0.jsonl").read_text().splitlines()]
    assert all(r["async/weight_sync_convert_s"] > 0 and r["async/weight_sync_load_s"] > 0 for r in rows), rows
    lines = [x for ls in _sample_lines(save).values() for x in ls]
    summary = json.loads((save / "analysis" / "summary.json").read_text())
    found = {f["evidence"]["iteration"]: f for f in summary["findings"] if f["id"] == "engine_queueing"}
    assert found, [f["id"] for f in summary["findings"]]
    it, f = next(iter(found.items()))
    mine = [x for x in lines if x["iteration"] == it]
    share = sum(x["queue_s"] for x in mine) / sum((x["end_ns"] - x["start_ns"]) / 1e9 for x in mine)
    assert f["evidence"]["queue_share"] == pytest.approx(share, rel=1e-9)


def test_dpo_with_the_vllm_rollout(tmp_path):
    need_vllm()
    save = tmp_path / "prof"
    out = _run("examples.dpo.train_dpo", tmp_path, "dpo.rollout=vllm", "dpo.iterations=3",
               f"profiler_config.integrated.profile_save_path={save}")
    assert out.stdout.count("\niter ") == 3
    [(who, lines)] = _sample_lines(save).items()
    assert who == ("rollout", 0) and len(lines) == 3 * 16
    summary = json.loads((save / "analysis" / "summary.json").read_text())
    assert all(c["status"] == "ok" for c in summary["captures"])
