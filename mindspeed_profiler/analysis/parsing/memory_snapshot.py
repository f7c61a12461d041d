"""PyTorch memory snapshots (`*.memory_snapshot.pickle`, written by the torch / npu backends with
`profile_with_memory`). A pickle can run code when loaded: only plain containers and scalars are
accepted (the snapshot format needs nothing else), anything else is refused."""
from __future__ import annotations

import io
import pickle
from pathlib import Path

from mindspeed_profiler.core.fileio import read_regular_file


class _PlainUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str):   # no class, no function: plain data only
        raise pickle.UnpicklingError(f"refusing {module}.{name}: a memory snapshot holds plain data only")


# A snapshot records at most the allocator's history size (torch's default 100,000 entries per
# device; verl's trace_alloc_max_entries the same): far fewer events than this
MAX_EVENTS = 5_000_000
MAX_BLOCKS = 5_000_000


def read_memory_snapshot(path: Path, max_bytes: int = 2 << 30) -> dict:
    """The snapshot's plain data; ValueError when it is not one, or stands for more events than a
    snapshot holds: a pickle's memo lets a few bytes repeat one list or event millions of times (a
    0.2 MB file standing for 10**7 events), so the counts and the distinct objects are checked
    before anything walks them."""
    data = _PlainUnpickler(io.BytesIO(read_regular_file(path, max_bytes))).load()   # never a FIFO, bounded
    if not isinstance(data, dict) or not isinstance(data.get("device_traces"), list):
        raise ValueError(f"{path.name}: not a PyTorch memory snapshot (no device_traces)")
    traces = data["device_traces"]
    _bounded(path, "device_traces", [t for t in traces if isinstance(t, list)], MAX_EVENTS)
    segments = data.get("segments")
    if isinstance(segments, list):
        _bounded(path, "segments", [[s] for s in segments], MAX_BLOCKS)
        _bounded(path, "segment blocks", [s.get("blocks") for s in segments if isinstance(s, dict) and isinstance(s.get("blocks"), list)],
                 MAX_BLOCKS)
    return data


def _bounded(path: Path, what: str, lists: list[list], limit: int) -> None:
    total = sum(len(x) for x in lists)
    if total > limit:
        raise ValueError(f"{path.name}: {total} entries in {what}, more than the {limit} a memory snapshot holds")
    if len({id(x) for x in lists}) < len(lists) or len({id(e) for x in lists for e in x}) < total:
        raise ValueError(f"{path.name}: {what} repeat the same object (pickle memo references): not a snapshot the "
                         "allocator wrote")
