"""GRPO on Ray with a Megatron-core policy, profiled with mindspeed-profiler, then analysed.

    python -m examples.grpo.train_grpo --config examples/grpo/grpo.yaml [OVERRIDE ...]

Overrides are dotted key=value pairs for the profiler block (profiler_config.integrated.stage=all)
or the trainer block (grpo.iterations=3). A local Ray cluster is started unless RAY_ADDRESS is set.
After training: the timeline is merged (timeline/timeline.json, opens in Perfetto) and
`mindspeed-profiler analyse` runs over profile_save_path unless --no-analyse.

Each worker's profiler is told what its iteration did (step(tokens=, samples=, prompt_tokens=,
response_tokens=): its shard's prompt + response tokens) and the model (set_model: the GPTModel),
so that `profiler_config.metrics` writes <profile_save_path>/metrics/<role>_rank<R>.jsonl with
timings, tokens/s and MFU per iteration (docs/metrics.md).

`grpo.straggler_rank=R grpo.straggler_ms=M` makes actor rank R a straggler: it sleeps M ms right
before each gradient all-reduce of its update (update_epochs of them per iteration), inside its
actor_update stage, and the other actor ranks wait for it in the all-reduce. Default: off.

Responses have variable lengths: each sample stops at its first end token (task.END, finish reason
"stop") or at grpo.response_len tokens ("length"); rewards, log-probs, the KL and the loss use each
response's tokens up to and including its end. The actor starts from `grpo.sft_steps` supervised
steps on the task's right answers (an SFT model, as RL post-training starts from; 0: none).
Each actor rank records its samples (profiler.record_samples, stage actor_generate) in
<profile_save_path>/samples/ (docs/rollout.md).
`grpo.long_tail_every=K grpo.long_tail_tokens=T` makes one sample in K (its index in the rank's
batch a multiple of K) ignore the end token and run to T tokens (T may exceed response_len): the
rank's whole batch decodes until it is done, the long tail that the analysis's long_tail_generation
finding measures. Default: off (K = 0; T = 64).

`grpo.mode=async`: a rollout worker group apart from the actors generates batch k+1 while the
actors train on batch k, with weights at most `grpo.max_staleness` versions old (default 1), the
weights sent after each update (gather, transfer, load); `async/*` metrics per iteration in
<profile_save_path>/metrics/driver_rank0.jsonl. `grpo.rollout_delay_ms` slows the rollout,
`grpo.update_delay_ms` the update (knobs that make one group the bottleneck). docs/async.md.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Sequence

import torch

if __package__ in (None, ""):   # run as a file (python examples/grpo/train_grpo.py): make `examples` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from examples.common import task  # noqa: E402
from examples.common.trainer import RayCluster, Trainer, run_trainer, trainer_main
from examples.common.rl_math import group_advantages
from examples.common.workers import GRPOActorWorker, ReferenceWorker
from examples.common.async_workers import AsyncActorWorker
from mindspeed_profiler.core.formats import CAT_STAGE  # noqa: E402
from mindspeed_profiler.tracing import trace_span  # noqa: E402

DEFAULT_CONFIG = Path(__file__).with_name("grpo.yaml")


class GRPO(Trainer):
    section = "grpo"
    batch_key = "prompts_per_iteration"
    actor_cls = GRPOActorWorker
    async_actor_cls = AsyncActorWorker   # grpo.mode=async: the actor group's class
    ref_cls = ReferenceWorker

    def __init__(self, settings: dict[str, Any]):
        super().__init__(settings)
        self.gen = torch.Generator().manual_seed(int(settings.get("seed", 0)))

    def iteration(self, cluster: RayCluster, actors: list[Any], ref: Any, it: int) -> dict[str, float]:
        g = self.s
        span = {"iteration": it}
        prompts = task.make_prompts(int(g["prompts_per_iteration"]), int(g["prompt_len"]), self.gen)
        with trace_span("actor_generate", cat="rpc", args=span):
            shards = self.generate(cluster, actors, prompts, g["samples_per_prompt"], it)
        # each rank's batch is as wide as its longest response: padded to the widest (masked out)
        tokens = task.pad_responses([shard[0] for shard in shards])
        lengths = torch.cat([shard[1] for shard in shards])
        return self.train_on(cluster, actors, ref, it, tokens, lengths)

    def train_on(self, cluster: RayCluster, actors: list[Any], ref: Any, it: int, tokens: torch.Tensor,
                 lengths: torch.Tensor) -> dict[str, float]:
        """Reward, advantages, log-probs and the update of one batch (both modes: the async mode's
        batch comes from the rollout group, examples/common/async_loop.py)."""
        g, n = self.s, len(actors)
        span = {"iteration": it}
        # driver-side work between the workers' stages is a stage too (on the timeline and the critical path)
        with trace_span("reward", cat=CAT_STAGE, args={**span, "stage": "reward"}):
            rewards = task.reward(tokens[:, : g["prompt_len"]], tokens[:, g["prompt_len"]:], lengths)
        with trace_span("compute_advantage", cat=CAT_STAGE, args={**span, "stage": "compute_advantage"}):
            advantages = group_advantages(rewards, int(g["samples_per_prompt"]))
        with trace_span("compute_log_prob", cat="rpc", args=span):
            old_refs = [a.actor_log_prob.remote(s) for a, s in zip(actors, tokens.chunk(n))]
            ref_ref = ref.compute_ref_log_prob.remote(tokens, lengths)  # runs concurrently with the actors
            old_logp = torch.cat(cluster.get(old_refs))
            ref_logp = cluster.get(ref_ref)
        with trace_span("actor_update", cat="rpc", args=span):
            stats = cluster.get([
                a.update.remote(t, ln, o, r, adv, g["prompt_len"], g["update_epochs"], g["clip_ratio"], g["kl_coef"])
                for a, t, ln, o, r, adv in zip(actors, tokens.chunk(n), lengths.chunk(n), old_logp.chunk(n),
                                               ref_logp.chunk(n), advantages.chunk(n))])
        return {"reward": float(rewards.mean()), "loss": sum(s["loss"] for s in stats) / n,
                "kl": sum(s["kl"] for s in stats) / n, "length": float(lengths.float().mean())}

    def format_row(self, row: dict[str, float]) -> str:
        return f"reward {row['reward']:.3f}  loss {row['loss']:+.4f}  kl {row['kl']:.4f}  length {row['length']:.2f}"

    def summary(self, history: list[dict[str, float]]) -> str:
        return f"reward {history[0]['reward']:.3f} -> {history[-1]['reward']:.3f}" if history else "no iterations"


def run(config_path: str | Path = DEFAULT_CONFIG, overrides: Sequence[str] = (), analyse: bool = True) -> dict[str, Any]:
    """Train; return per-iteration stats and where the profiling data landed."""
    return run_trainer(GRPO, config_path, overrides, analyse)


def main(argv: Sequence[str] | None = None) -> int:
    return trainer_main(GRPO, __doc__, DEFAULT_CONFIG, argv)


if __name__ == "__main__":
    sys.exit(main())
