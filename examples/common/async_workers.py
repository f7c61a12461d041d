"""The asynchronous GRPO example's workers (docs/async.md): a rollout group apart from the actors,
and the weight sync between them in its phases, each a span on the timeline (weight_sync.py):

    gather    actor rank 0: its weights copied (ActorWorker.gather_weights)
    convert   ... into Hugging Face names and layouts, when the rollout is a vLLM engine
    transfer  the rollout rank fetches them from the object store (load_weights)
    load      ... and loads them into its model (or its engine's)

The rollout rank is a Megatron model here (RolloutWorker) or a vLLM engine (vllm_rollout.py's
VllmRolloutWorker, `grpo.rollout=vllm`); both generate whole batches the same way (BatchRollout).
Times are wall clock (time.time()), as the sample records', so that the driver can place them in its
iterations; the spans are the tracer's (clock-aligned on the merged timeline).
"""
from __future__ import annotations

import time
from typing import Any

import torch

from examples.common import weight_sync
from examples.common.workers import ActorWorker, GRPOActorWorker, sleep_ms
from mindspeed_profiler.tracing import trace_span

CAT_ASYNC = "async"   # the timeline category of the async spans (rollout_generate, wait_rollout, weight_sync/*)


class AsyncActorWorker(GRPOActorWorker):
    """A GRPO actor rank of the async mode: the update (slowed by `grpo.update_delay_ms`, a knob
    that makes the trainer the bottleneck) and the gather of its weights for the rollout group."""

    def _all_reduce_grads(self) -> None:
        # update_delay_ms: every rank sleeps before each gradient all-reduce (update_epochs per update),
        # inside its actor_update stage, as the straggler knob does on one rank
        sleep_ms(self.model_cfg.get("update_delay_ms", 0))
        super()._all_reduce_grads()


class BatchRollout:
    """What a rollout rank of the async mode does, whatever generates: whole batches with the
    weights it was last sent (their version recorded with every sample). Its class gives
    `generate(prompts, n_samples, response_len, temperature, policy_version)` -> (tokens, lengths)
    and `load_weights(holder, version)`."""

    role = "rollout"
    trainable = False
    version = 0   # the policy version of the weights loaded: 0, the warm-started policy, until load_weights

    def generate_batch(self, prompts: torch.Tensor, n_samples: int, response_len: int, temperature: float,
                       batch: int) -> dict[str, Any]:
        """One batch (this worker's iteration `batch`): generate() with the weights loaded last, whose
        version (this worker's own count, not the caller's word) goes into every sample's record;
        `grpo.rollout_delay_ms` delays its decoding (a knob that makes the rollout the bottleneck, as a
        slower engine would). Returns tokens, lengths, the version and the wall-clock span."""
        policy_version = self.version
        start = time.time()
        with trace_span("rollout_generate", cat=CAT_ASYNC, args={"batch": batch, "policy_version": policy_version}):
            tokens, lengths = self.generate(prompts, n_samples, response_len, temperature, policy_version)
        end = time.time()
        self._note_batch(tokens, prompts.shape[1], lengths)
        self.end_iteration()   # the rollout's iteration is the batch: its samples are recorded under it
        return {"tokens": tokens, "lengths": lengths, "policy_version": policy_version, "start": start, "end": end}


class RolloutWorker(BatchRollout, ActorWorker):
    """A rank of the rollout group of a Megatron model: never trained."""

    def warm_start(self) -> None:
        """Nothing: its weights come from the actor (the warm-started policy is version 0)."""

    def _sample(self, prompts: torch.Tensor, how: Any, temperature: float) -> Any:
        # the rollout_delay_ms knob inside the generation stage, before the first token (a slower engine)
        sleep_ms(self.model_cfg.get("rollout_delay_ms", 0))
        return super()._sample(prompts, how, temperature)

    def load_weights(self, holder: list, version: int) -> dict[str, Any]:
        """The rollout's phases of the sync: fetch the gathered weights (`holder`: [ObjectRef]) and load them."""
        import ray

        t0 = time.time()
        with weight_sync.phase_span("transfer", version):
            weights = ray.get(holder[0], timeout=300)
        t1 = time.time()
        with weight_sync.phase_span("load", version):
            self.set_weights(weights)
        self.version = version
        return {"transfer": (t0, t1), "load": (t1, time.time()), "policy_version": version}
