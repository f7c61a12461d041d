"""Ray workers for the example trainers: a real Megatron-core GPT policy per process, profiled.

Each worker process builds its own IntegratedProfiler (kernel-level captures of the configured
stages, steps and ranks) and tracer (spans on the cross-worker timeline), exactly as a user's
MindSpeed-RL / verl worker would.
"""
from __future__ import annotations

import os
import time
from typing import Any

import torch

from examples.common import generation, hf_checkpoint, task, weight_sync
from examples.common.mcore_cpu import ModelShape, build_model, causal_mask, group_store, init_megatron, max_positions
from examples.common.rl_math import dpo_loss, grpo_loss, response_mask, sequence_log_probs, sft_loss, token_log_probs
from mindspeed_profiler import IntegratedProfiler, load_config, mstx_range, mstx_timer_decorator
from mindspeed_profiler.tracing import init_tracer, shutdown_tracer


def sleep_ms(ms: float) -> None:
    """The examples' delay knobs (straggler_ms, log_prob_delay_ms, the async mode's): a sleep inside
    the stage the knob slows, so that the profiles show that stage longer."""
    if ms:
        time.sleep(ms / 1000.0)


def out_of_memory(tokens: torch.Tensor, at: int) -> torch.OutOfMemoryError:
    """`<trainer>.oom_at=ITER`: the error CUDA's caching allocator raises (a real torch.OutOfMemoryError,
    its message's form), asking for what the forward's logits take, made on purpose on this CPU run."""
    asked = tokens.numel() * task.VOCAB_SIZE * 4 * 1024   # the logits in float32, 1024 times over
    return torch.OutOfMemoryError(f"CUDA out of memory. Tried to allocate {asked / 2**30:.2f} GiB. (made on purpose: "
                                  f"oom_at={at}, the reference's log-prob stage)")


class PolicyWorker:
    """One rank of a worker group: a GPT policy, a profiler and a tracer. Subclasses add the RL steps."""

    role = "policy"         # the worker group: names the capture directories and the process on the timeline

    trainable = True        # builds an optimizer

    def __init__(self, config: dict, rank: int, world_size: int, model: dict, seed: int = 0):
        # cheap: the group's rendezvous address is only known once rank 0 has picked it (setup)
        self.config, self.rank, self.world_size, self.model_cfg, self.seed = config, rank, world_size, model, seed

    def rendezvous(self) -> tuple[str, int]:
        """On rank 0: the address and port on this node where the group's torch.distributed init
        meets. The store listening there is held until setup hands it to init_process_group."""
        import ray

        self._store = group_store(ray.util.get_node_ip_address(), 0, self.world_size, master=True)
        return self._store.host, self._store.port

    def setup(self, master_addr: str, master_port: int) -> dict[str, Any]:
        torch.set_num_threads(1)  # several workers share a laptop's cores
        rank, world_size, model = self.rank, self.world_size, self.model_cfg
        os.environ.update(RANK=str(rank), WORLD_SIZE=str(world_size), LOCAL_RANK="0",
                          MASTER_ADDR=master_addr, MASTER_PORT=str(master_port))
        store = getattr(self, "_store", None) or group_store(master_addr, master_port, world_size, master=False)
        init_megatron(rank=rank, world_size=world_size, seed=self.seed, store=store)  # same seed: identical initial weights
        # positions for the longest response a run may ask for (the long-tail knob's, even when off:
        # the same initial weights with and without it)
        self.seq_len = max_positions(model)
        self.shape = ModelShape.from_settings(model)   # gpt, or qwen2 (an architecture vLLM serves)
        self.model = build_model(self.shape, task.VOCAB_SIZE, self.seq_len)
        torch.manual_seed(self.seed + 1000 * (rank + 1))  # but each rank samples its own stream
        if self.trainable:
            self.optimizer = torch.optim.Adam(self.model.parameters(), lr=model.get("lr", 1e-3))
        self.warm_start()   # before the profiler starts: not part of any iteration
        self.start_profiling(self.model)
        return self.ready()

    def start_profiling(self, model: Any = None) -> None:
        """This process's profiler (the whole config: captures, metrics) and tracer, started: what a
        user's worker does at the end of its init, as MindSpeed-RL does. `model`: for MFU."""
        rank = self.rank
        self.cfg = load_config(self.config, check_paths=False)  # validated on the driver already
        init_tracer(self.cfg, role=self.role, rank=rank)   # one name per process: the profiler's role
        # the whole config: its `metrics` section too (per-iteration timings, tokens/s, MFU)
        self.profiler = IntegratedProfiler(self.cfg, role=self.role)
        if model is not None:
            self.profiler.set_model(model)   # the GPTModel: Megatron's parameter formula, for MFU
        self._counts: dict[str, int] = {}     # what this rank's iteration processed, given to step()
        self.profiler.start()  # MindSpeed starts it at the end of worker init

    def warm_start(self) -> None:
        """What a worker does to its model before training (nothing here)."""

    # -- plumbing -------------------------------------------------------------------------
    def ready(self) -> dict[str, Any]:
        return {"rank": self.rank, "pid": os.getpid(), "host": os.uname().nodename}

    def get_weights(self) -> dict[str, torch.Tensor]:
        return {k: v.detach().clone() for k, v in self.model.state_dict().items() if v is not None and torch.is_tensor(v)}

    def set_weights(self, weights: dict[str, torch.Tensor]) -> None:
        self.model.load_state_dict(weights, strict=False)

    def end_iteration(self) -> None:
        counts, self._counts = self._counts, {}
        self.profiler.step(**counts)   # tokens=, samples=, prompt_tokens=, response_tokens= of this rank's batch

    def _note_batch(self, sequences: torch.Tensor, prompt_len: int, lengths: torch.Tensor, **more: int) -> None:
        """This rank's batch of the iteration (prompt + response token ids, one row per sequence;
        `lengths` each response's own tokens, the padding after its end not counted), as the counts
        its profiler.step() reports."""
        n, responses = sequences.shape[0], int(lengths.sum())
        self._counts = {"tokens": n * prompt_len + responses, "samples": n, "prompt_tokens": n * prompt_len,
                        "response_tokens": responses, **more}

    def shutdown(self) -> dict[str, Any]:
        if hasattr(self, "profiler"):  # setup may not have run (a failed group start)
            self.profiler.stop()
        shutdown_tracer()
        import torch.distributed as dist

        if dist.is_initialized():
            dist.destroy_process_group()
        return {"rank": self.rank}

    # -- model ----------------------------------------------------------------------------
    def _logits(self, tokens: torch.Tensor) -> torch.Tensor:
        b, t = tokens.shape
        pos = torch.arange(t).unsqueeze(0).expand(b, -1)
        return self.model(tokens, pos, causal_mask(t))

    def greedy_tokens(self, tokens: torch.Tensor) -> torch.Tensor:
        """The most likely next token after each position [B, T] (no stage: a check of the weights
        a rollout serves, tests/test_examples_vllm_rollout.py)."""
        with torch.no_grad():
            self.model.eval()
            return self._logits(tokens).argmax(-1)

    @mstx_timer_decorator
    def _log_probs(self, tokens: torch.Tensor) -> torch.Tensor:
        return token_log_probs(self._logits(tokens), tokens)

    def compute_log_prob(self, tokens: torch.Tensor, stage: str) -> torch.Tensor:
        with self.profiler.stage(stage), torch.no_grad():
            # `<trainer>.log_prob_delay_ms`: a slower log-prob pass made on purpose, on every rank that scores
            sleep_ms(self.model_cfg.get("log_prob_delay_ms", 0))
            # `<trainer>.oom_at=ITER`: the reference (one rank: no collective waits for it) runs out of device
            # memory here in iteration ITER; the profiler records it (docs/memory.md) and it goes on unchanged
            if self.role == "reference" and self.model_cfg.get("oom_at") == self.profiler.iteration:
                raise out_of_memory(tokens, self.profiler.iteration)
            self.model.eval()
            return self._log_probs(tokens)

    def _all_reduce_grads(self) -> None:
        """Data-parallel gradient average over the worker group (gloo on CPU, NCCL/HCCL on devices).
        `<trainer>.straggler_rank=R <trainer>.straggler_ms=M`: rank R sleeps M ms right before it, so
        that the other ranks wait for it in the all-reduce (a straggler made on purpose)."""
        import torch.distributed as dist

        if self.rank == self.model_cfg.get("straggler_rank"):
            sleep_ms(self.model_cfg.get("straggler_ms", 0))
        if self.world_size == 1:
            return
        with mstx_range("grad_all_reduce"):
            for p in self.model.parameters():
                if p.grad is not None:
                    dist.all_reduce(p.grad)
                    p.grad /= self.world_size


class ReferenceWorker(PolicyWorker):
    """The frozen reference policy (KL anchor)."""

    role = "reference"
    trainable = False

    def compute_ref_log_prob(self, tokens: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        self._note_batch(tokens, self.model_cfg["prompt_len"], lengths)
        return self.compute_log_prob(tokens, "reference_compute_log_prob")


class ActorWorker(PolicyWorker):
    """An actor that generates: variable-length responses, each to its end token or its token limit,
    recorded per sample (profiler.record_samples) for the long-tail analysis."""

    role = "actor"
    SFT_LR, SFT_BATCH = 0.01, 32

    def warm_start(self) -> None:
        """`<trainer>.sft_steps` supervised steps on the task's right answers (rank 0 only: the driver
        copies its weights to the other ranks and the reference), as RL post-training starts from an
        SFT model: the policy already ends its answers, so the examples' natural lengths are the
        task's (no rambling to the token limit), and RL has the rest to learn."""
        steps = self.model_cfg.get("sft_steps", 0)
        if self.rank != 0 or not steps:
            return
        prompt_len, gen = self.model_cfg["prompt_len"], torch.Generator().manual_seed(self.seed)
        opt = torch.optim.Adam(self.model.parameters(), lr=self.SFT_LR)   # its own: RL's optimizer starts fresh
        self.model.train()
        for _ in range(steps):
            prompts = task.make_prompts(self.SFT_BATCH, prompt_len, gen)
            right, lengths = task.answers(prompts, task.LONGEST_ANSWER)
            seq = torch.cat([prompts, right], 1)
            logp = token_log_probs(self._logits(seq), seq)
            loss = sft_loss(logp, response_mask(lengths, prompt_len, logp.shape[1]))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()

    @mstx_timer_decorator
    def _sample(self, prompts: torch.Tensor, how: generation.Plan, temperature: float) -> generation.Decoded:
        # no KV cache: the model is tiny; what matters is real work to profile
        return generation.decode(lambda tokens: self._logits(tokens)[:, -1], prompts, how, temperature)

    def generate(self, prompts: torch.Tensor, n_samples: int, response_len: int, temperature: float = 1.0,
                 policy_version: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
        """n_samples responses per prompt: (prompt + response tokens [B, P + W], PAD after each end;
        response lengths [B], END included). `<trainer>.long_tail_every=K` (the model config) makes
        one sample in K ignore END and run to `long_tail_tokens`."""
        start = time.time()
        with self.profiler.stage("actor_generate"), torch.no_grad():
            self.model.eval()
            prompts = prompts.repeat_interleave(n_samples, dim=0)
            how = generation.plan(prompts.shape[0], response_len, self.model_cfg.get("long_tail_every", 0),
                                  self.model_cfg.get("long_tail_tokens", 0))
            out = self._sample(prompts, how, temperature)
            self.profiler.record_samples(generation.sample_items(out, how, prompts.shape[1], start, policy_version),
                                         stage="actor_generate")
            return out.tokens, out.lengths


    def gather_weights(self, version: int, hf: bool = False) -> dict[str, Any]:
        """The actor's phases of the weight sync (examples/common/weight_sync.py): `gather` (this
        rank's weights copied after `version` updates) and, for a vLLM rollout (`hf`), `convert`
        (into Hugging Face names and layouts); the last one puts them into Ray's object store.
        Returns {"ref": [its ObjectRef] (a list, so that Ray hands the reference on unresolved),
        "phases": {phase: (start, end) wall clock}, "start", "end"}."""
        import ray

        phases = {}
        start = time.time()
        with weight_sync.phase_span("gather", version):
            weights = self.get_weights()
            if not hf:
                ref = ray.put(weights)
        phases["gather"] = (start, time.time())
        if hf:
            with weight_sync.phase_span("convert", version):
                ref = ray.put(hf_checkpoint.to_hf_state_dict(weights, self.shape))
            phases["convert"] = (phases["gather"][1], time.time())
        return {"ref": [ref], "phases": phases, "start": start, "end": time.time()}


class GRPOActorWorker(ActorWorker):
    """The GRPO actor: generates, scores its own log-probs, and updates the policy."""

    def actor_log_prob(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.compute_log_prob(tokens, "actor_compute_log_prob")

    def update(self, tokens: torch.Tensor, lengths: torch.Tensor, old_logp: torch.Tensor, ref_logp: torch.Tensor,
               advantages: torch.Tensor, prompt_len: int, epochs: int = 1, clip_ratio: float = 0.2,
               kl_coef: float = 0.01) -> dict[str, float]:
        self._note_batch(tokens, prompt_len, lengths)
        with self.profiler.stage("actor_update"):
            self.model.train()
            mask = response_mask(lengths, prompt_len, old_logp.shape[1])  # each response up to its END
            stats: dict[str, float] = {}
            t0 = time.perf_counter()
            for _ in range(epochs):
                with mstx_range("forward_backward"):
                    logp = self._log_probs(tokens)
                    loss, stats = grpo_loss(logp, old_logp, ref_logp, advantages, mask, clip_ratio, kl_coef)
                    self.optimizer.zero_grad(set_to_none=True)
                    loss.backward()
                self._all_reduce_grads()
                with mstx_range("optimizer_step"):
                    self.optimizer.step()
            stats.update(loss=loss.item(), update_s=time.perf_counter() - t0)
            return stats


class DPOActorWorker(ActorWorker):
    """The DPO policy: generates its rejected responses, then one preference-loss update per batch
    against reference log-probs."""

    def update(self, chosen: torch.Tensor, rejected: torch.Tensor, lengths: torch.Tensor, ref_chosen: torch.Tensor,
               ref_rejected: torch.Tensor, prompt_len: int, beta: float = 0.1) -> dict[str, float]:
        """`lengths`: the chosen then the rejected responses' lengths (END included)."""
        both = torch.cat([chosen, rejected])
        self._note_batch(both, prompt_len, lengths, pairs=chosen.shape[0])
        with self.profiler.stage("actor_update"):
            self.model.train()
            with mstx_range("forward_backward"):
                logp = self._log_probs(both)
                pc, pr = sequence_log_probs(logp, response_mask(lengths, prompt_len, logp.shape[1])).chunk(2)
                loss, stats = dpo_loss(pc, pr, ref_chosen, ref_rejected, beta)
                self.optimizer.zero_grad(set_to_none=True)
                loss.backward()
            self._all_reduce_grads()
            with mstx_range("optimizer_step"):
                self.optimizer.step()
            stats["loss"] = loss.item()
            return stats
