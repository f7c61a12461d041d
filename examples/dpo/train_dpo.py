"""DPO on Ray with a Megatron-core policy, profiled with mindspeed-profiler, then analysed.

    python -m examples.dpo.train_dpo --config examples/dpo/dpo.yaml [OVERRIDE ...]

Overrides: profiler_config.* for the profiler, dpo.* for the trainer (dpo.iterations=3).
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
from mindspeed_profiler import load_config
from mindspeed_profiler.tracing import init_tracer, shutdown_tracer, trace_span


def run(config_path: str | Path, overrides: Sequence[str] = (), analyse: bool = True) -> dict[str, Any]:
    d, profiler_overrides = split_overrides(config_path, "dpo", overrides)
    cfg = load_config(config_path, profiler_overrides)
    n_actors = int(d["actor_ranks"])
    check_even_shards(int(d["pairs_per_iteration"]), "pairs_per_iteration", n_actors, "dpo")
    model = dict(d["model"], prompt_len=d["prompt_len"], response_len=d["response_len"])
    history: list[dict[str, float]] = []
    with RayCluster(cfg) as cluster:
        init_tracer(cfg, role="driver", rank=0)
        from examples.common.workers import DPOActorWorker, ReferenceWorker

        actors = cluster.group(DPOActorWorker, n_actors, model, seed=d["seed"])
        ref = cluster.group(ReferenceWorker, 1, model, seed=d["seed"])[0]
        cluster.sync_clocks()
        cluster.get(ref.set_weights.remote(actors[0].get_weights.remote()))
        gen = torch.Generator().manual_seed(d["seed"])
        t_start = time.perf_counter()
        for it in range(1, int(d["iterations"]) + 1):
            t0 = time.perf_counter()
            with trace_span("iteration", cat="iteration", args={"iteration": it}):
                chosen, rejected = task.preference_pairs(int(d["pairs_per_iteration"]), int(d["prompt_len"]),
                                                         int(d["response_len"]), gen)
                with trace_span("reference_compute_log_prob", cat="rpc", args={"iteration": it}):
                    ref_lp = cluster.get(ref.compute_ref_log_prob.remote(torch.cat([chosen, rejected])))
                    ref_seq = ref_lp[:, d["prompt_len"] - 1:].sum(-1)
                    ref_c, ref_r = ref_seq.chunk(2)
                with trace_span("actor_update", cat="rpc", args={"iteration": it}):
                    stats = cluster.get([
                        a.update.remote(c, r, rc, rr, d["prompt_len"], d["beta"])
                        for a, c, r, rc, rr in zip(actors, chosen.chunk(n_actors), rejected.chunk(n_actors),
                                                   ref_c.chunk(n_actors), ref_r.chunk(n_actors))])
                cluster.get([w.end_iteration.remote() for w in actors + [ref]])
            row = {"iteration": it, "loss": sum(s["loss"] for s in stats) / len(stats),
                   "accuracy": sum(s["accuracy"] for s in stats) / len(stats), "seconds": time.perf_counter() - t0}
            history.append(row)
            print(f"iter {it:3d}  loss {row['loss']:.4f}  pref-acc {row['accuracy']:.2f}  {row['seconds']:.2f}s", flush=True)
        wall = time.perf_counter() - t_start
        cluster.shutdown_workers(actors + [ref])
        shutdown_tracer()
    out = {"history": history, "train_seconds": wall, "profile_save_path": cfg.integrated.profile_save_path}
    out.update(analyse_and_merge(cfg, analyse))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", default=str(Path(__file__).with_name("dpo.yaml")))
    p.add_argument("--no-analyse", action="store_true", help="skip the offline analysis after training")
    p.add_argument("overrides", nargs="*", help="dotted key=value (profiler_config.* or dpo.*)")
    args = p.parse_intermixed_args(argv)  # overrides may come before or after the options
    result = run(args.config, args.overrides, analyse=not args.no_analyse)
    h = result["history"]
    print(f"loss {h[0]['loss']:.4f} -> {h[-1]['loss']:.4f} in {result['train_seconds']:.1f}s; "
          f"profiling data in {result['profile_save_path']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
