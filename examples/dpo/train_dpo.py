"""DPO on Ray with a Megatron-core policy, profiled with mindspeed-profiler, then analysed.

    python -m examples.dpo.train_dpo --config examples/dpo/dpo.yaml [OVERRIDE ...]

Overrides: profiler_config.* for the profiler, dpo.* for the trainer (dpo.iterations=3).
A local Ray cluster is started unless RAY_ADDRESS is set.

The pairs are made on policy, as in self-play fine-tuning (SPIN): each actor rank generates one
response per prompt of its shard (the rejected one: each stops at its first end token or at
dpo.response_len tokens) and the task's right answer is the chosen one; the DPO log-probabilities sum
each response's tokens up to and including its end token. What the policy learnt shows in the reward
of its own responses (printed per iteration): the loss is measured on fresh samples each iteration,
so it stays near log 2. Each actor rank records its generated
samples (profiler.record_samples, stage actor_generate) in <profile_save_path>/samples/
(docs/rollout.md). `dpo.long_tail_every=K dpo.long_tail_tokens=T`: one sample in K (its index in the
rank's batch a multiple of K) ignores the end token and runs to T tokens, a long tail made on
purpose. Default: off (K = 0; T = 64).

Each worker's profiler.step() gets its batch's counts (tokens=, samples= sequences, chosen and
rejected, pairs=, prompt_tokens=, response_tokens= each response's own tokens) and the model
(set_model), for the per-iteration metrics of `profiler_config.metrics` (docs/metrics.md).

`dpo.straggler_rank=R dpo.straggler_ms=M`: actor rank R sleeps M ms right before its gradient
all-reduce in the update (inside its actor_update stage); the other actor ranks wait for it.
Default: off.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Sequence

import torch

if __package__ in (None, ""):   # run as a file (python examples/dpo/train_dpo.py): make `examples` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from examples.common import task  # noqa: E402
from examples.common.rl_math import response_mask, sequence_log_probs
from examples.common.trainer import RayCluster, Trainer, run_trainer, trainer_main
from examples.common.workers import DPOActorWorker, ReferenceWorker
from mindspeed_profiler.core.formats import CAT_STAGE  # noqa: E402
from mindspeed_profiler.tracing import trace_span  # noqa: E402

DEFAULT_CONFIG = Path(__file__).with_name("dpo.yaml")


class DPO(Trainer):
    section = "dpo"
    batch_key = "pairs_per_iteration"
    actor_cls = DPOActorWorker
    ref_cls = ReferenceWorker

    def __init__(self, settings: dict[str, Any]):
        super().__init__(settings)
        self.gen = torch.Generator().manual_seed(int(settings.get("seed", 0)))

    def iteration(self, cluster: RayCluster, actors: list[Any], ref: Any, it: int) -> dict[str, float]:
        d, n = self.s, len(actors)
        span = {"iteration": it}
        p_len = int(d["prompt_len"])
        prompts = task.make_prompts(int(d["pairs_per_iteration"]), p_len, self.gen)
        with trace_span("actor_generate", cat="rpc", args=span):   # each rank: one response per prompt of its shard
            shards = self.generate(cluster, actors, prompts, 1, it)
        with trace_span("make_pairs", cat=CAT_STAGE, args={**span, "stage": "make_pairs"}):   # driver work: a stage too
            generated = task.pad_responses([shard[0] for shard in shards])
            right, right_len = task.answers(prompts, max(generated.shape[1] - p_len, task.LONGEST_ANSWER))
            # chosen then rejected, one width: the right answers and the policy's own responses
            both = task.pad_responses([torch.cat([prompts, right], 1), generated])
            lengths = torch.cat([right_len] + [shard[1] for shard in shards])
            chosen, rejected = both.chunk(2)
        with trace_span("reference_compute_log_prob", cat="rpc", args=span):
            ref_lp = cluster.get(ref.compute_ref_log_prob.remote(both, lengths))
            ref_c, ref_r = sequence_log_probs(ref_lp, response_mask(lengths, p_len, ref_lp.shape[1])).chunk(2)
        len_c, len_r = lengths.chunk(2)
        with trace_span("actor_update", cat="rpc", args=span):
            stats = cluster.get([
                a.update.remote(c, r, torch.cat([lc, lr]), rc, rr, p_len, d["beta"])
                for a, c, r, lc, lr, rc, rr in zip(actors, chosen.chunk(n), rejected.chunk(n), len_c.chunk(n),
                                                   len_r.chunk(n), ref_c.chunk(n), ref_r.chunk(n))])
        # on-policy pairs: the loss is measured on the policy's fresh samples; the reward of those says what it learnt
        return {"loss": sum(s["loss"] for s in stats) / n, "accuracy": sum(s["accuracy"] for s in stats) / n,
                "reward": float(task.reward(prompts, rejected[:, p_len:], len_r).mean())}

    def format_row(self, row: dict[str, float]) -> str:
        return f"loss {row['loss']:.4f}  pref-acc {row['accuracy']:.2f}  reward {row['reward']:.3f}"

    def summary(self, history: list[dict[str, float]]) -> str:
        if not history:
            return "no iterations"
        first, last = history[0], history[-1]
        return f"reward of the actor's responses {first['reward']:.3f} -> {last['reward']:.3f}, loss {first['loss']:.4f} -> {last['loss']:.4f}"


def run(config_path: str | Path = DEFAULT_CONFIG, overrides: Sequence[str] = (), analyse: bool = True) -> dict[str, Any]:
    return run_trainer(DPO, config_path, overrides, analyse)


def main(argv: Sequence[str] | None = None) -> int:
    return trainer_main(DPO, __doc__, DEFAULT_CONFIG, argv)


if __name__ == "__main__":
    sys.exit(main())
