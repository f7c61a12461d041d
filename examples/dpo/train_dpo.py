"""DPO on Ray with a Megatron-core policy, profiled with mindspeed-profiler, then analysed.

    python -m examples.dpo.train_dpo --config examples/dpo/dpo.yaml [OVERRIDE ...]

Overrides: profiler_config.* for the profiler, dpo.* for the trainer (dpo.iterations=3).
A local Ray cluster is started unless RAY_ADDRESS is set.

Each worker's profiler.step() gets its batch's counts (tokens=, samples= sequences, chosen and
rejected, pairs=, prompt_tokens=, response_tokens=) and the model (set_model), for the per-iteration
metrics of `profiler_config.metrics` (docs/metrics.md).

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
        with trace_span("make_pairs", cat=CAT_STAGE, args={**span, "stage": "make_pairs"}):   # driver work: a stage too
            chosen, rejected = task.preference_pairs(int(d["pairs_per_iteration"]), int(d["prompt_len"]),
                                                     int(d["response_len"]), self.gen)
        with trace_span("reference_compute_log_prob", cat="rpc", args=span):
            ref_lp = cluster.get(ref.compute_ref_log_prob.remote(torch.cat([chosen, rejected])))
            ref_c, ref_r = ref_lp[:, d["prompt_len"] - 1:].sum(-1).chunk(2)
        with trace_span("actor_update", cat="rpc", args=span):
            stats = cluster.get([
                a.update.remote(c, r, rc, rr, d["prompt_len"], d["beta"])
                for a, c, r, rc, rr in zip(actors, chosen.chunk(n), rejected.chunk(n), ref_c.chunk(n), ref_r.chunk(n))])
        return {"loss": sum(s["loss"] for s in stats) / n, "accuracy": sum(s["accuracy"] for s in stats) / n}

    def format_row(self, row: dict[str, float]) -> str:
        return f"loss {row['loss']:.4f}  pref-acc {row['accuracy']:.2f}"

    def summary(self, history: list[dict[str, float]]) -> str:
        return f"loss {history[0]['loss']:.4f} -> {history[-1]['loss']:.4f}" if history else "no iterations"


def run(config_path: str | Path = DEFAULT_CONFIG, overrides: Sequence[str] = (), analyse: bool = True) -> dict[str, Any]:
    return run_trainer(DPO, config_path, overrides, analyse)


def main(argv: Sequence[str] | None = None) -> int:
    return trainer_main(DPO, __doc__, DEFAULT_CONFIG, argv)


if __name__ == "__main__":
    sys.exit(main())
