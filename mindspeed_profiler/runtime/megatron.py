"""The Megatron parallel layout of this process, when megatron.core's parallel state is initialised.

Never imports Megatron: if the training code has not imported `megatron.core.parallel_state`,
its parallel state cannot be initialised, and importing Megatron just to find that out costs
seconds.
"""
from __future__ import annotations

import sys
from typing import Mapping

# dimension -> (rank getter, world-size getter) in megatron.core.parallel_state
_GETTERS = {
    "tp": ("get_tensor_model_parallel_rank", "get_tensor_model_parallel_world_size"),
    "pp": ("get_pipeline_model_parallel_rank", "get_pipeline_model_parallel_world_size"),
    "dp": ("get_data_parallel_rank", "get_data_parallel_world_size"),
    "cp": ("get_context_parallel_rank", "get_context_parallel_world_size"),
    "ep": ("get_expert_model_parallel_rank", "get_expert_model_parallel_world_size"),
}


def parallel_layout() -> dict[str, list[int]] | None:
    """{"tp": [rank, size], "pp": ..., "dp": ..., "cp": ..., "ep": ...} or None when not initialised."""
    ps = sys.modules.get("megatron.core.parallel_state")
    if ps is None:
        return None
    try:
        if not ps.model_parallel_is_initialized():
            return None
    except Exception:
        return None
    out: dict[str, list[int]] = {}
    for dim, (rank_fn, size_fn) in _GETTERS.items():
        try:
            out[dim] = [int(getattr(ps, rank_fn)()), int(getattr(ps, size_fn)())]
        except Exception:
            continue  # a dimension this Megatron version does not have, or whose group is absent
    return out or None


def parallel_selected(layout: Mapping[str, list[int]], wanted: Mapping[str, tuple[int, ...]]) -> bool:
    """Pure: does a layout match `profile_parallel_ranks` ({"tp": (0,), "pp": (0,)})? A dimension
    the layout lacks counts as rank 0 of size 1."""
    for dim, ranks in wanted.items():
        rank = layout.get(dim, [0, 1])[0]
        if rank not in ranks:
            return False
    return True
