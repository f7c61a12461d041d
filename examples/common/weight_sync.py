"""The weight sync from the Megatron actor into the rollout, in the phases both modes time and name
alike (core/formats.WEIGHT_SYNC_PHASES, spans `weight_sync/<phase>` of category `weight_sync`):

    gather    actor rank 0 copies its weights (ActorWorker.gather_weights)
    convert   ... into Hugging Face names and layouts, for a vLLM rollout (hf_checkpoint.to_hf_state_dict)
    transfer  the rollout fetches them from Ray's object store and hands them to its engine
    load      the engine's worker loads them into its model (WeightLoader, below)

For vLLM the weights cross two process boundaries (the rollout worker, vLLM's engine core, its
worker), through `LLM.collective_rpc`. vLLM 0.32 refuses tensors there (msgpack to the engine core,
then pickle to the worker: `cannot pickle memoryview objects`) and a callable without
VLLM_ALLOW_INSECURE_SERIALIZATION=1: the weights go as one safetensors blob to a method of a
worker extension (`worker_extension_cls`, as TRL and OpenRLHF do). The load is timed inside the
engine's worker on the host's monotonic clock and drawn on the rollout's lane (trace_complete).
"""
from __future__ import annotations

import time
from typing import Any, Callable

import torch

from mindspeed_profiler.core.formats import CAT_WEIGHT_SYNC, WEIGHT_SYNC_PHASES
from mindspeed_profiler.tracing import trace_complete, trace_span

PHASES = WEIGHT_SYNC_PHASES
EXTENSION = "examples.common.weight_sync.WeightLoader"   # LLM(..., worker_extension_cls=EXTENSION)
LOAD_METHOD = "load_synced_weights"                     # not `update_weights`: vLLM's worker has its own


def phase_span(phase: str, version: int) -> Any:
    """The span of one phase of the sync that makes `version` (a tracer span; a no-op without one)."""
    return trace_span(f"weight_sync/{phase}", cat=CAT_WEIGHT_SYNC, args={"policy_version": version, "phase": phase})


def timing_row(spans: dict[str, tuple[float, float]]) -> dict[str, float]:
    """Pure: a sync's tracker keys from its phases' (start, end): `timing_s/weight_sync_<phase>` in
    PHASES' order, and `timing_s/weight_sync`, their sum (verl: timing_s/update_weights)."""
    row = {f"timing_s/weight_sync_{p}": spans[p][1] - spans[p][0] for p in PHASES if p in spans}
    row["timing_s/weight_sync"] = sum(row.values())
    return row


def to_blob(weights: dict[str, torch.Tensor]) -> bytes:
    """The weights as one safetensors blob (what crosses vLLM's RPC: bytes pickle, tensors do not)."""
    from safetensors.torch import save

    return save({k: v.detach().contiguous() for k, v in weights.items()})


def from_blob(blob: bytes) -> dict[str, torch.Tensor]:
    from safetensors.torch import load

    return load(blob)


class WeightLoader:
    """vLLM worker extension (`worker_extension_cls`): methods mixed into each engine worker, called
    with `llm.collective_rpc(LOAD_METHOD, args=(blob,))`. Runs in vLLM's worker process."""

    def load_synced_weights(self, blob: bytes) -> dict[str, Any]:
        """Load an HF-named state dict (a safetensors blob) into the served model; its times are
        this process's time.monotonic_ns() (the host's clock) for the caller's `load` span."""
        start = time.monotonic_ns()
        weights = from_blob(blob)
        # the worker's own in-place reload (vLLM's model_loader.reload): the CPU worker repacks the
        # weights it loaded at start, so model.load_weights alone no longer fits its parameters
        self.reload_weights(weights_iterator=list(weights.items()))   # type: ignore[attr-defined]
        return {"start_ns": start, "end_ns": time.monotonic_ns(), "tensors": len(weights)}


def load_into_engine(llm: Any, fetch: Callable[[], dict[str, torch.Tensor]], version: int) -> dict[str, Any]:
    """The rollout's side of the sync: `fetch()` the weights (from Ray's object store), make the
    blob and send it to every engine worker, which loads it. `transfer` runs from here until the first worker begins
    to load, `load` from there until the last one is done, both on the host's monotonic clock (the
    reply's way back, a few ms, is in neither). Draws both spans; returns them as wall-clock times
    (time.time(), for the driver's rows) and the blob's size. Raises what the engine raised, or
    RuntimeError when a worker loaded fewer tensors than sent."""
    wall0, mono0 = time.time(), time.monotonic_ns()
    weights = fetch()
    blob = to_blob(weights)
    replies = llm.collective_rpc(LOAD_METHOD, args=(blob,))
    first = min(r["start_ns"] for r in replies)
    last = max(r["end_ns"] for r in replies)
    args = {"policy_version": version, "workers": len(replies), "bytes": len(blob)}
    trace_complete("weight_sync/transfer", mono0, first, cat=CAT_WEIGHT_SYNC, args={**args, "phase": "transfer"})
    trace_complete("weight_sync/load", first, last, cat=CAT_WEIGHT_SYNC, args={**args, "phase": "load"})
    short = [r for r in replies if r["tensors"] != len(weights)]
    if short:
        raise RuntimeError(f"weight sync {version}: an engine worker took {short[0]['tensors']} of {len(weights)} tensors")
    wall = lambda ns: wall0 + (ns - mono0) / 1e9   # noqa: E731 - one clock to the other, one offset
    return {"transfer": (wall0, wall(first)), "load": (wall(first), wall(last)), "bytes": len(blob)}
