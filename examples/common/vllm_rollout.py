"""The examples' rollout on a real vLLM engine (`<trainer>.rollout=vllm`, docs/rollout.md "The
examples' rollout on vLLM"), as verl, OpenRLHF and MindSpeed-RL run theirs.

A rollout worker (VllmRolloutWorker, a Ray actor of role `rollout`) owns a vLLM `LLM`, built from
the actor's initial weights written locally as a Hugging Face Qwen2 checkpoint (hf_checkpoint.py:
config, safetensors, the task's tokenizer). After each update the actor's weights are synced into
the running engine (weight_sync.py: gather, convert, transfer, load). vLLM generates every sample
as its own request (n = 1; the long-tail knob's samples ignore the end token): vLLM keeps one
RequestStateStats per request, so SamplingParams(n=K) would give K samples one set of times, and
the per-sample records would lose each sample's own lifecycle. The log-probs of the generated
tokens are recomputed by the actor and the reference, as real frameworks do.

Two placements (`<trainer>.vllm.placement`), the two ways RL frameworks run vLLM:
- engine_process (verl, OpenRLHF): vLLM's engine core and worker are processes of their own; the
  engine's torch profiler, driven by our config (attach_engine), captures the generation stage's
  calls into `<save>/actor_generate/rollout-vllm_rank0_step<N>...` (placed by worker); our own
  capture of the rollout worker sees the calls into the engine, not its ops.
- in_process (MindSpeed-RL's integrated mode; VLLM_ENABLE_V1_MULTIPROCESSING=0): the engine runs in
  the rollout worker's process: our own actor_generate capture records vLLM's ops; the engine's own
  capture is skipped while ours records (one torch profiler per process).

Nothing here needs vLLM until an engine is built: the settings' checks run on the driver without it.
"""
from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from examples.common import generation, hf_checkpoint, task, weight_sync
from examples.common.async_workers import BatchRollout
from examples.common.mcore_cpu import max_positions
from examples.common.workers import PolicyWorker, sleep_ms
from mindspeed_profiler import mstx_timer_decorator
from mindspeed_profiler.core.formats import CAT_WEIGHT_SYNC
from mindspeed_profiler.tracing import trace_span

ROLLOUTS = ("megatron", "vllm")
PLACEMENTS = ("engine_process", "in_process")
VLLM_DEFAULTS: dict[str, Any] = {"placement": "engine_process", "max_num_seqs": 256, "kv_cache_gb": 1, "model": {}}
MAX_KV_CACHE_GB = 1024
# the head dims vLLM 0.32's CPU attention serves (vllm/v1/attention/backends/cpu_attn.py get_supported_head_sizes)
CPU_HEAD_DIMS = (32, 64, 80, 96, 112, 128, 160, 192, 224, 256, 512)


def is_vllm(settings: dict[str, Any]) -> bool:
    return settings.get("rollout", "megatron") == "vllm"


def vllm_settings(settings: dict[str, Any]) -> dict[str, Any]:
    return {**VLLM_DEFAULTS, **(settings.get("vllm") or {})}


def check_rollout(settings: dict[str, Any], section: str) -> list[str]:
    """The rollout settings' problems, all at once (empty: fine): `rollout` (megatron | vllm) and,
    for vllm, `vllm.placement`, `vllm.max_num_seqs`, `vllm.kv_cache_gb`, the model's architecture
    (vLLM serves `arch: qwen2`; its CPU attention takes head dims of 32 and up), and vLLM installed."""
    kind = settings.get("rollout", "megatron")
    if kind not in ROLLOUTS:
        return [f"{section}.rollout={kind!r} must be one of {', '.join(ROLLOUTS)}"]
    if kind != "vllm":
        return []
    v, problems = vllm_settings(settings), []
    if v["placement"] not in PLACEMENTS:
        problems.append(f"{section}.vllm.placement={v['placement']!r} must be one of {', '.join(PLACEMENTS)}")
    n = v["max_num_seqs"]
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= 65_536:
        problems.append(f"{section}.vllm.max_num_seqs={n!r} must be a whole number from 1 to 65536 (the engine's "
                        "concurrent sequences)")
    gb = v["kv_cache_gb"]
    if isinstance(gb, bool) or not isinstance(gb, (int, float)) or not 0 < gb <= MAX_KV_CACHE_GB:
        problems.append(f"{section}.vllm.kv_cache_gb={gb!r} must be a number of GB in (0, {MAX_KV_CACHE_GB}] "
                        "(VLLM_CPU_KVCACHE_SPACE)")
    model = worker_model(settings)
    if model.get("arch", "gpt") != "qwen2":
        problems.append(f"{section}.rollout=vllm needs {section}.vllm.model.arch=qwen2 (an architecture vLLM serves), "
                        f"not {model.get('arch', 'gpt')!r}")
    elif model.get("hidden", 64) % max(model.get("heads", 4), 1) == 0 and \
            model.get("hidden", 64) // max(model.get("heads", 4), 1) not in CPU_HEAD_DIMS:
        problems.append(f"{section}.vllm.model: hidden / heads = {model.get('hidden', 64)} / {model.get('heads', 4)}: "
                        f"vLLM's CPU attention serves head dims {', '.join(map(str, CPU_HEAD_DIMS))}")
    if importlib.util.find_spec("vllm") is None:
        problems.append(f"{section}.rollout=vllm: vLLM is not installed here (`pip install -e .[engines]`, which "
                        f"./run main does: vLLM's CPU build); or use {section}.rollout=megatron (the actor generates)")
    return problems


def worker_model(settings: dict[str, Any]) -> dict[str, Any]:
    """The `model` settings every worker builds: `model`, with `vllm.model` over it for a vLLM rollout."""
    model = dict(settings["model"])
    if is_vllm(settings):
        model.update(vllm_settings(settings)["model"])
    return model


def sample_requests(prompts: torch.Tensor, how: generation.Plan, temperature: float) -> list[tuple[list[int], dict]]:
    """Pure: one request per sample, (prompt token ids, SamplingParams keywords): up to its token
    limit, stopping at the end token, except the long-tail knob's samples, which may never sample
    it (allowed_token_ids: the counting alphabet), as generation.decode's do."""
    out = []
    for row, limit, ignore in zip(prompts.tolist(), how.limits, how.ignore_end):
        params: dict[str, Any] = {"max_tokens": limit, "temperature": temperature}
        if ignore:
            params.update(ignore_eos=True, allowed_token_ids=list(range(task.VOCAB)))
        else:
            params.update(stop_token_ids=[task.END])
        out.append((row, params))
    return out


def batch_of(outputs: list[Any], prompts: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Pure on RequestOutputs (their first completion): prompt + response tokens [B, P + W] (W the
    longest response; PAD after each end) and the response lengths [B], END included when the
    sample stopped at it, as generation.decode gives them."""
    responses = [list(o.outputs[0].token_ids) for o in outputs]
    width = max((len(r) for r in responses), default=0)
    body = torch.full((len(responses), width), task.PAD, dtype=torch.long)
    for i, r in enumerate(responses):
        if r:
            body[i, :len(r)] = torch.tensor(r, dtype=torch.long)
    return torch.cat([prompts, body], 1), torch.tensor([len(r) for r in responses], dtype=torch.long)


def start_engine(cluster: Any, actor: Any, rollout: Any) -> dict[str, Any]:
    """On the driver: the rollout's engine built on actor rank 0's weights (version 0, converted to
    HF), what vLLM was built with said once."""
    gathered = cluster.get(actor.gather_weights.remote(0, hf=True))
    info = cluster.get(rollout.start_engine.remote(gathered["ref"], 0))
    print(f"rollout: vLLM {info['vllm']} ({info['placement']}) started in {info['seconds']:.1f}s", flush=True)
    for note in info["notes"]:
        print(f"rollout: {note}", flush=True)
    return info


def sync_weights(cluster: Any, actor: Any, rollout: Any, version: int) -> dict[str, float]:
    """On the driver, after update `version` (sync mode): actor rank 0's weights into the rollout's
    engine, under the driver's `weight_sync` span; the tracker row's `timing_s/weight_sync_<phase>`
    and `timing_s/weight_sync` (their sum) of the driver's metrics file."""
    with trace_span("weight_sync", cat=CAT_WEIGHT_SYNC, args={"policy_version": version}):
        gathered = cluster.get(actor.gather_weights.remote(version, hf=True))
        loaded = cluster.get(rollout.load_weights.remote(gathered["ref"], version))
    return weight_sync.timing_row({**gathered["phases"], "transfer": loaded["transfer"], "load": loaded["load"]})


class VllmRolloutWorker(BatchRollout, PolicyWorker):
    """A rank of the rollout group: a vLLM engine (no Megatron model, no torch.distributed group),
    a profiler and a tracer. `start_engine` builds the engine from the initial weights; `generate`
    (sync mode) and `generate_batch` (async mode) generate; `load_weights` takes a sync."""

    def rendezvous(self) -> tuple[str, int]:
        return "", 0   # no group to meet: the engine is its own

    def setup(self, master_addr: str, master_port: int) -> dict[str, Any]:
        torch.set_num_threads(1)
        self.llm: Any = None
        self._dir: Path | None = None
        self.start_profiling(None)
        return self.ready()

    def start_engine(self, holder: list, version: int = 0) -> dict[str, Any]:
        """Build the engine on the actor's weights (`holder`: [ObjectRef] of gather_weights(hf=True)):
        written here as an HF checkpoint (this node's temp dir), served by vLLM built with what our
        config asks of it (engine_profiler_args), and attached to this worker's profiler."""
        import ray
        from mindspeed_profiler.engines.attach import attach_engine, engine_profiler_args

        v = vllm_settings(self.model_cfg)
        in_process = v["placement"] == "in_process"
        t0 = time.time()
        self._dir = Path(tempfile.mkdtemp(prefix="rollout-vllm-"))
        hf_checkpoint.write_hf_checkpoint(self._dir / "model", ray.get(holder[0], timeout=300), self.model_cfg)
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", str(v["kv_cache_gb"]))
        os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")   # its INFO lines (~1,000 a run) would bury the run's own
        if in_process:
            os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"   # read when the engine is built
        from vllm import LLM

        args = engine_profiler_args(self.cfg, engine="vllm")
        extra = {"distributed_executor_backend": "uni"} if in_process else {}
        self.llm = LLM(str(self._dir / "model"), dtype="float32", enforce_eager=True,
                       max_model_len=max_positions(self.model_cfg), max_num_seqs=v["max_num_seqs"], seed=self.seed,
                       worker_extension_cls=weight_sync.EXTENSION, **args["kwargs"], **extra)
        self.engine = attach_engine(self.profiler, self.llm, in_process=in_process)
        self.version = version
        import vllm

        return {"seconds": time.time() - t0, "notes": args["notes"], "placement": v["placement"],
                "vllm": vllm.__version__}

    def generate(self, prompts: torch.Tensor, n_samples: int, response_len: int, temperature: float = 1.0,
                 policy_version: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """n_samples responses per prompt from the engine (as ActorWorker.generate gives them), each
        sample recorded from its RequestOutput with the version of the weights loaded last (this
        worker's own count: `policy_version`, the caller's word, is not used)."""
        with self.profiler.stage("actor_generate"), torch.no_grad():
            sleep_ms(self.model_cfg.get("rollout_delay_ms", 0))   # the async mode's slower-rollout knob
            prompts = prompts.repeat_interleave(n_samples, dim=0)
            how = generation.plan(prompts.shape[0], response_len, self.model_cfg.get("long_tail_every", 0),
                                  self.model_cfg.get("long_tail_tokens", 0))
            outputs = self._engine_generate(sample_requests(prompts, how, temperature))
            self.profiler.record_samples(outputs, stage="actor_generate", policy_version=self.version)
            tokens, lengths = batch_of(outputs, prompts)
        self._note_batch(tokens, prompts.shape[1], lengths)
        return tokens, lengths

    @mstx_timer_decorator
    def _engine_generate(self, requests: list[tuple[list[int], dict]]) -> list[Any]:
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        return self.llm.generate([TokensPrompt(prompt_token_ids=ids) for ids, _ in requests],
                                 [SamplingParams(**params) for _, params in requests], use_tqdm=False)

    def load_weights(self, holder: list, version: int) -> dict[str, Any]:
        """The rollout's phases of the sync (transfer, load: weight_sync.load_into_engine)."""
        import ray

        phases = weight_sync.load_into_engine(self.llm, lambda: ray.get(holder[0], timeout=300), version)
        self.version = version
        return {"transfer": phases["transfer"], "load": phases["load"], "policy_version": version,
                "bytes": phases["bytes"]}

    def prompt_logprobs(self, sequences: list[list[int]]) -> list[list[float]]:
        """The engine's log-probability of each token of each sequence after the first (vLLM's
        prompt_logprobs), for the conversion's checks (tests/test_examples_vllm_rollout.py)."""
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        outs = self.llm.generate([TokensPrompt(prompt_token_ids=s) for s in sequences],
                                 SamplingParams(max_tokens=1, prompt_logprobs=0, temperature=0.0), use_tqdm=False)
        return [[step[tok].logprob for step, tok in zip(o.prompt_logprobs[1:], s[1:])] for o, s in zip(outs, sequences)]

    def greedy(self, prompts: list[list[int]], tokens: int) -> list[list[int]]:
        """The engine's greedy continuation of each prompt, `tokens` long (the end token not special),
        for the conversion's checks."""
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        outs = self.llm.generate([TokensPrompt(prompt_token_ids=p) for p in prompts],
                                 SamplingParams(max_tokens=tokens, temperature=0.0, ignore_eos=True), use_tqdm=False)
        return [list(o.outputs[0].token_ids) for o in outs]

    def shutdown(self) -> dict[str, Any]:
        out = super().shutdown()   # the profiler first: its last engine capture is placed while the engine lives
        if self.llm is not None:
            try:
                self.llm.llm_engine.engine_core.shutdown()
            except Exception as exc:   # the run is over: say it, go on
                print(f"rollout: shutting the vLLM engine down failed: {type(exc).__name__}: {exc}", flush=True)
            self.llm = None
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
        return out
