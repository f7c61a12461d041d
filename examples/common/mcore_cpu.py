"""Run a real Megatron-core GPTModel on a plain CPU (for the examples and tests).

Megatron-core assumes CUDA in places that a CPU-only model still reaches: the global memory buffer
used by attention, the CUDA RNG tracker that dropout forks, and (rotary positions only) the rotary
embedding, which moves its frequencies to the current CUDA device. Each is swapped here for a CPU
equivalent, only when CUDA is not available. Everything else is stock Megatron-core.
Two architectures (ModelShape): the examples' default GPT, and Qwen2 (an architecture vLLM serves;
examples/common/hf_checkpoint.py converts its weights to Hugging Face's names and layouts).
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass
import operator
from datetime import timedelta
from functools import reduce
from typing import Any

import torch


def init_megatron(rank: int = 0, world_size: int = 1, tp: int = 1, pp: int = 1, seed: int = 1234, *,
                  store: "torch.distributed.Store") -> None:
    """Initialise torch.distributed (gloo on CPU) in the group's `store` (group_store) and
    Megatron's parallel state, once per process."""
    import torch.distributed as dist
    from megatron.core import parallel_state

    if not dist.is_initialized():
        backend = "nccl" if torch.cuda.is_available() else "gloo"
        dist.init_process_group(backend, store=store, rank=rank, world_size=world_size)
    if not parallel_state.model_parallel_is_initialized():
        parallel_state.initialize_model_parallel(tensor_model_parallel_size=tp, pipeline_model_parallel_size=pp)
    if torch.cuda.is_available():
        from megatron.core.tensor_parallel.random import model_parallel_cuda_manual_seed

        model_parallel_cuda_manual_seed(seed)
    else:
        _install_cpu_shims(seed)
    torch.manual_seed(seed)


STORE_TIMEOUT = timedelta(minutes=10)


def group_store(addr: str, port: int, world_size: int, master: bool) -> "torch.distributed.TCPStore":
    """The group's rendezvous store. The master (rank 0) passes port 0 and keeps the store it gets:
    the port stays bound from the moment it is picked, so no other process can take it before the
    group meets (picking a free port, closing it and binding it again later raced: EADDRINUSE).
    The others connect to the master's `store.port`."""
    import torch.distributed as dist

    return dist.TCPStore(addr, port, world_size, master, timeout=STORE_TIMEOUT, wait_for_workers=False)


def _install_cpu_shims(seed: int) -> None:
    from megatron.core import parallel_state
    from megatron.core.models.common.embeddings.rotary_pos_embedding import RotaryEmbedding
    from megatron.core.tensor_parallel import random as mrandom
    from megatron.core.utils import GlobalMemoryBuffer

    class CpuMemoryBuffer(GlobalMemoryBuffer):
        def get_tensor(self, tensor_shape, dtype, name, mem_alloc_context=None):  # same signature as upstream
            n = reduce(operator.mul, tensor_shape, 1)
            buf = self.buffer.get((name, dtype))
            if buf is None or buf.numel() < n:
                buf = self.buffer[(name, dtype)] = torch.empty(n, dtype=dtype)
            return buf[:n].view(*tensor_shape)

    class CpuRNGStatesTracker(mrandom.CudaRNGStatesTracker):
        def add(self, name, seed):
            self._is_initialized = True
            gen = torch.Generator().manual_seed(seed)
            self.states_[name] = gen.get_state()

        @contextlib.contextmanager
        def fork(self, name=mrandom._MODEL_PARALLEL_RNG_TRACKER_NAME):
            outer = torch.get_rng_state()
            torch.set_rng_state(self.states_[name])
            try:
                yield
            finally:
                self.states_[name] = torch.get_rng_state()
                torch.set_rng_state(outer)

    def rotary_emb_on_cpu(self, max_seq_len: int, offset: int = 0) -> torch.Tensor:
        # upstream's RotaryEmbedding.get_emb (0.16.1) less its first line, the move of inv_freq to CUDA
        freqs = self.get_freqs_non_repeated(max_seq_len, offset)
        if not self.rotary_interleaved:
            emb = torch.cat((freqs, freqs), dim=-1)
        else:
            emb = torch.stack((freqs.view(-1, 1), freqs.view(-1, 1)), dim=-1).view(freqs.shape[0], -1)
        return emb[:, None, None, :]

    RotaryEmbedding.get_emb = rotary_emb_on_cpu
    parallel_state._GLOBAL_MEMORY_BUFFER = CpuMemoryBuffer()
    tracker = CpuRNGStatesTracker()
    tracker.add(mrandom._MODEL_PARALLEL_RNG_TRACKER_NAME, seed + 2718)
    tracker.add(mrandom._DATA_PARALLEL_RNG_TRACKER_NAME, seed)
    tracker.add(mrandom._EXPERT_PARALLEL_RNG_TRACKER_NAME, seed + 100)
    mrandom._CUDA_RNG_STATE_TRACKER = tracker
    mrandom._CUDA_RNG_STATE_TRACKER_INITIALIZED = True


ARCHS = ("gpt", "qwen2")   # gpt: the examples' default; qwen2: an architecture vLLM serves (hf_checkpoint.py)


@dataclass(frozen=True)
class ModelShape:
    """The actor's architecture, from a trainer's `model` settings (examples/*/*.yaml): `layers`,
    `hidden`, `heads`, and `arch` (default "gpt": learned absolute positions, LayerNorm, GeLU,
    Megatron's defaults, the examples' model as it always was). `arch: qwen2` is Hugging Face's
    Qwen2: RMSNorm (`norm_eps`, HF's rms_norm_eps), SwiGLU, rotary positions (`rope_theta`),
    grouped-query attention (`query_groups` key/value heads, HF's num_key_value_heads), a bias on
    the QKV projection only, untied input and output embeddings. `query_groups` (default: `heads`)
    and `ffn_hidden` (default 4 x hidden) apply to both; None keeps Megatron's default."""
    arch: str = "gpt"
    layers: int = 2
    hidden: int = 64
    heads: int = 4
    query_groups: int | None = None
    ffn_hidden: int | None = None
    rope_theta: float | None = None    # qwen2 only; None: HF Qwen2's default
    norm_eps: float | None = None      # None: Megatron's 1e-5 (gpt), HF Qwen2's rms_norm_eps 1e-6 (qwen2)

    QWEN2_ROPE_THETA = 10000.0
    QWEN2_NORM_EPS = 1e-6

    @classmethod
    def from_settings(cls, settings: dict[str, Any], where: str = "model") -> "ModelShape":
        """The shape a `model` settings dict asks for (other keys in it, e.g. `lr`, are ignored);
        a bad value: ValueError naming `<where>.<key>`, the value and what is allowed."""
        names = ("arch", "layers", "hidden", "heads", "query_groups", "ffn_hidden", "rope_theta", "norm_eps")
        return cls(**{k: settings[k] for k in names if k in settings}).checked(where)

    def checked(self, where: str = "model") -> "ModelShape":
        def bad(key: str, allowed: str) -> ValueError:
            return ValueError(f"{where}.{key} = {getattr(self, key)!r}: {allowed}")

        if self.arch not in ARCHS:
            raise bad("arch", f"allowed: {', '.join(ARCHS)}")
        for key in ("layers", "hidden", "heads", "query_groups", "ffn_hidden"):
            value = getattr(self, key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise bad(key, "a whole number >= 1")
        for key in ("rope_theta", "norm_eps"):
            value = getattr(self, key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0):
                raise bad(key, "a number > 0")
        if self.hidden % self.heads:
            raise bad("hidden", f"a multiple of {where}.heads = {self.heads}")
        if self.heads % self.groups:
            raise bad("query_groups", f"a divisor of {where}.heads = {self.heads}")
        if self.arch == "gpt" and self.rope_theta is not None:
            raise bad("rope_theta", f"only for {where}.arch = qwen2 (gpt has learned absolute positions)")
        return self

    @property
    def groups(self) -> int:
        return self.query_groups or self.heads

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @property
    def ffn(self) -> int:
        return self.ffn_hidden or 4 * self.hidden

    @property
    def theta(self) -> float:
        return float(self.rope_theta or self.QWEN2_ROPE_THETA)

    @property
    def eps(self) -> float:
        return float(self.norm_eps or (self.QWEN2_NORM_EPS if self.arch == "qwen2" else 1e-5))

    def transformer_options(self) -> dict[str, Any]:
        """TransformerConfig's keyword arguments for this shape beyond the sizes (none for a
        default gpt: Megatron's own defaults, exactly as the examples always built it)."""
        given = {k: v for k, v in (("num_query_groups", self.query_groups), ("ffn_hidden_size", self.ffn_hidden),
                                   ("layernorm_epsilon", self.norm_eps)) if v is not None}
        if self.arch == "gpt":
            return given
        import torch.nn.functional as F

        # SwiGLU: linear_fc1 holds [gate; up], silu(gate) * up; no linear bias but the QKV's (Qwen2's)
        return {**given, "num_query_groups": self.groups, "ffn_hidden_size": self.ffn, "layernorm_epsilon": self.eps,
                "normalization": "RMSNorm", "gated_linear_unit": True, "activation_func": F.silu,
                "add_bias_linear": False, "add_qkv_bias": True}


def max_positions(settings: dict[str, Any]) -> int:
    """The model's positions for a trainer's `model` settings: the prompt and the longest response
    a run may ask for (the long-tail knob's, even when off: the same initial weights with and
    without it)."""
    return settings["prompt_len"] + max(settings["response_len"], settings.get("long_tail_tokens", 0))


def build_gpt(vocab_size: int, seq_len: int, num_layers: int = 2, hidden: int = 64, heads: int = 4, *,
              arch: str = "gpt", query_groups: int | None = None, ffn_hidden: int | None = None,
              rope_theta: float | None = None, norm_eps: float | None = None):
    """A small real Megatron-core GPTModel (local layer spec, fp32, CPU-initialised); the keywords:
    ModelShape's."""
    shape = ModelShape(arch, num_layers, hidden, heads, query_groups, ffn_hidden, rope_theta, norm_eps)
    return build_model(shape.checked(), vocab_size, seq_len)


def build_model(shape: ModelShape, vocab_size: int, seq_len: int):
    """build_gpt for a ModelShape (e.g. ModelShape.from_settings of a trainer's `model` settings)."""
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.models.gpt.gpt_model import GPTModel
    from megatron.core.transformer.transformer_config import TransformerConfig

    config = TransformerConfig(
        num_layers=shape.layers, hidden_size=shape.hidden, num_attention_heads=shape.heads,
        use_cpu_initialization=not torch.cuda.is_available(), pipeline_dtype=torch.float32,
        hidden_dropout=0.0, attention_dropout=0.0, **shape.transformer_options(),
    )
    if shape.arch == "qwen2":
        # the local spec keeps the norms as separate modules (input_layernorm, pre_mlp_layernorm);
        # rope: rotate-half (Megatron's rotary_interleaved=False), as HF's Qwen2
        spec = get_gpt_layer_local_spec(normalization="RMSNorm")
        more = {"position_embedding_type": "rope", "rotary_base": shape.theta, "rotary_percent": 1.0,
                "share_embeddings_and_output_weights": False}
    else:
        spec, more = get_gpt_layer_local_spec(), {"position_embedding_type": "learned_absolute"}
    model = GPTModel(config=config, transformer_layer_spec=spec, vocab_size=vocab_size, max_sequence_length=seq_len,
                     **more)
    return model.cuda() if torch.cuda.is_available() else model


def causal_mask(seq_len: int, device=None) -> torch.Tensor:
    """Megatron's attention mask convention: True = masked out."""
    return torch.ones(seq_len, seq_len, dtype=torch.bool, device=device).triu(1).view(1, 1, seq_len, seq_len)
