"""Who this process is in the job: rank, world size, local rank."""
from __future__ import annotations

import os
import sys


def resolve_rank(rank: int | None = None, world_size: int | None = None) -> tuple[int, int, int | None]:
    """(rank, world_size, local_rank): explicit arguments, else torch.distributed when initialised,
    else the RANK / WORLD_SIZE / LOCAL_RANK environment, else (0, 1)."""
    if rank is None or world_size is None:
        d_rank = d_world = None
        dist = sys.modules.get("torch.distributed")  # never import torch just to learn it is not initialised
        try:
            if dist is not None and dist.is_available() and dist.is_initialized():
                d_rank, d_world = dist.get_rank(), dist.get_world_size()
        except Exception:
            pass
        if d_rank is None:
            d_rank = env_int("RANK")
            d_world = env_int("WORLD_SIZE")
        rank = rank if rank is not None else (d_rank if d_rank is not None else 0)
        world_size = world_size if world_size is not None else (d_world if d_world is not None else max(1, rank + 1))
    return int(rank), int(world_size), env_int("LOCAL_RANK")


def env_int(name: str) -> int | None:
    """A non-negative integer from the environment, or None. A value set but unusable (not an
    integer, negative, beyond 32 bits) is reported once and ignored: rank 0 / world size 1 then."""
    raw = os.environ.get(name)
    if raw is None:
        return None
    try:
        value = int(raw)
        if 0 <= value < 2**31:
            return value
    except ValueError:
        pass
    from mindspeed_profiler.core.warn import warn_once

    warn_once(("env-int", name, raw[:40]), "environment %s=%r is not a rank number (an integer from 0 to 2**31 - 1): "
              "ignored, the profiler uses its default", name, raw[:40])
    return None
