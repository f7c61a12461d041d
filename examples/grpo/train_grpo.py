"""GRPO on Ray with a Megatron-core policy, profiled with mindspeed-profiler, then analysed.

    python -m examples.grpo.train_grpo --config examples/grpo/grpo.yaml [OVERRIDE ...]

Overrides are dotted key=value pairs for the profiler block (profiler_config.integrated.stage=all)
or the trainer block (grpo.iterations=3). A local Ray cluster is started unless RAY_ADDRESS is set.
After training: the timeline is merged (timeline/timeline.json, opens in Perfetto) and
`mindspeed-profiler analyse` runs over profile_save_path unless --no-analyse.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any, Sequence

import torch

from examples.common import task
from examples.common.driver import RayCluster, analyse_and_merge, check_even_shards, split_overrides
from examples.common.rl_math import group_advantages
from mindspeed_profiler import load_config
from mindspeed_profiler.tracing import init_tracer, shutdown_tracer, trace_span


def run(config_path: str | Path, overrides: Sequence[str] = (), analyse: bool = True) -> dict[str, Any]:
    """Train; return per-iteration stats and where the profiling data landed."""
    train, profiler_overrides = split_overrides(config_path, "grpo", overrides)
    cfg = load_config(config_path, profiler_overrides)  # config errors fail here, before any worker starts
    g = train
    n_actors = int(g["actor_ranks"])
    check_even_shards(int(g["prompts_per_iteration"]), "prompts_per_iteration", n_actors, "grpo")
    model = dict(g["model"], prompt_len=g["prompt_len"], response_len=g["response_len"])
    history: list[dict[str, float]] = []
    with RayCluster(cfg) as cluster:
        init_tracer(cfg, role="driver", rank=0)
        from examples.common.workers import GRPOActorWorker, ReferenceWorker

        actors = cluster.group(GRPOActorWorker, n_actors, model, seed=g["seed"])
        ref = cluster.group(ReferenceWorker, 1, model, seed=g["seed"])[0]
        cluster.sync_clocks()
        # the reference starts as a copy of the initial policy
        cluster.get(ref.set_weights.remote(actors[0].get_weights.remote()))
        gen = torch.Generator().manual_seed(g["seed"])
        t_start = time.perf_counter()
        for it in range(1, int(g["iterations"]) + 1):
            t0 = time.perf_counter()
            with trace_span("iteration", cat="iteration", args={"iteration": it}):
                prompts = task.make_prompts(int(g["prompts_per_iteration"]), int(g["prompt_len"]), gen)
                shards = prompts.chunk(n_actors)
                with trace_span("actor_generate", cat="rpc", args={"iteration": it}):
                    seqs = cluster.get([a.generate.remote(s, g["samples_per_prompt"], g["response_len"], g["temperature"])
                                        for a, s in zip(actors, shards)])
                tokens = torch.cat(seqs)
                with trace_span("reward", cat="driver", args={"iteration": it}):
                    rewards = task.reward(tokens[:, : g["prompt_len"]], tokens[:, g["prompt_len"]:])
                    advantages = group_advantages(rewards, int(g["samples_per_prompt"]))
                with trace_span("compute_log_prob", cat="rpc", args={"iteration": it}):
                    old_refs = [a.actor_log_prob.remote(s) for a, s in zip(actors, tokens.chunk(n_actors))]
                    ref_ref = ref.compute_ref_log_prob.remote(tokens)  # runs concurrently with the actors
                    old_logp = torch.cat(cluster.get(old_refs))
                    ref_logp = cluster.get(ref_ref)
                with trace_span("actor_update", cat="rpc", args={"iteration": it}):
                    stats = cluster.get([
                        a.update.remote(t, o, r, adv, g["prompt_len"], g["update_epochs"], g["clip_ratio"], g["kl_coef"])
                        for a, t, o, r, adv in zip(actors, tokens.chunk(n_actors), old_logp.chunk(n_actors),
                                                   ref_logp.chunk(n_actors), advantages.chunk(n_actors))])
                cluster.get([w.end_iteration.remote() for w in actors + [ref]])
            row = {"iteration": it, "reward": float(rewards.mean()), "loss": sum(s["loss"] for s in stats) / len(stats),
                   "kl": sum(s["kl"] for s in stats) / len(stats), "seconds": time.perf_counter() - t0}
            history.append(row)
            print(f"iter {it:3d}  reward {row['reward']:.3f}  loss {row['loss']:+.4f}  kl {row['kl']:.4f}  "
                  f"{row['seconds']:.2f}s", flush=True)
        wall = time.perf_counter() - t_start
        cluster.shutdown_workers(actors + [ref])
        shutdown_tracer()
    out = {"history": history, "train_seconds": wall, "profile_save_path": cfg.integrated.profile_save_path}
    out.update(analyse_and_merge(cfg, analyse))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", default=str(Path(__file__).with_name("grpo.yaml")))
    p.add_argument("--no-analyse", action="store_true", help="skip the offline analysis after training")
    p.add_argument("overrides", nargs="*", help="dotted key=value (profiler_config.* or grpo.*)")
    args = p.parse_intermixed_args(argv)  # overrides may come before or after the options
    result = run(args.config, args.overrides, analyse=not args.no_analyse)
    first, last = result["history"][0]["reward"], result["history"][-1]["reward"]
    print(f"reward {first:.3f} -> {last:.3f} in {result['train_seconds']:.1f}s; profiling data in {result['profile_save_path']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
