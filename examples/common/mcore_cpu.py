"""Run a real Megatron-core GPTModel on a plain CPU (for the examples and tests).

Megatron-core assumes CUDA in two places that a CPU-only model still reaches: the global memory
buffer used by attention, and the CUDA RNG tracker that dropout forks. Both are swapped here for
CPU equivalents, only when CUDA is not available. Everything else is stock Megatron-core.
"""
from __future__ import annotations

import contextlib
import operator
from datetime import timedelta
from functools import reduce

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

    parallel_state._GLOBAL_MEMORY_BUFFER = CpuMemoryBuffer()
    tracker = CpuRNGStatesTracker()
    tracker.add(mrandom._MODEL_PARALLEL_RNG_TRACKER_NAME, seed + 2718)
    tracker.add(mrandom._DATA_PARALLEL_RNG_TRACKER_NAME, seed)
    tracker.add(mrandom._EXPERT_PARALLEL_RNG_TRACKER_NAME, seed + 100)
    mrandom._CUDA_RNG_STATE_TRACKER = tracker
    mrandom._CUDA_RNG_STATE_TRACKER_INITIALIZED = True


def build_gpt(vocab_size: int, seq_len: int, num_layers: int = 2, hidden: int = 64, heads: int = 4):
    """A small real Megatron-core GPTModel (local layer spec, fp32, CPU-initialised)."""
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.models.gpt.gpt_model import GPTModel
    from megatron.core.transformer.transformer_config import TransformerConfig

    config = TransformerConfig(
        num_layers=num_layers, hidden_size=hidden, num_attention_heads=heads,
        use_cpu_initialization=not torch.cuda.is_available(), pipeline_dtype=torch.float32,
        hidden_dropout=0.0, attention_dropout=0.0,
    )
    model = GPTModel(config=config, transformer_layer_spec=get_gpt_layer_local_spec(),
                     vocab_size=vocab_size, max_sequence_length=seq_len, position_embedding_type="learned_absolute")
    return model.cuda() if torch.cuda.is_available() else model


def causal_mask(seq_len: int, device=None) -> torch.Tensor:
    """Megatron's attention mask convention: True = masked out."""
    return torch.ones(seq_len, seq_len, dtype=torch.bool, device=device).triu(1).view(1, 1, seq_len, seq_len)
