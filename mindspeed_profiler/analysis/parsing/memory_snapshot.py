"""PyTorch memory snapshots (`*.memory_snapshot.pickle`, written by the torch / npu backends with
`profile_with_memory`). A pickle can run code when loaded: only plain containers and scalars are
accepted (the snapshot format needs nothing else), anything else is refused."""
from __future__ import annotations

import io
import pickle
from pathlib import Path


class _PlainUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str):   # no class, no function: plain data only
        raise pickle.UnpicklingError(f"refusing {module}.{name}: a memory snapshot holds plain data only")


def read_memory_snapshot(path: Path, max_bytes: int = 2 << 30) -> dict:
    size = path.stat().st_size
    if size > max_bytes:
        raise ValueError(f"{path.name}: {size} bytes, more than the {max_bytes} bytes a snapshot is read up to")
    data = _PlainUnpickler(io.BytesIO(path.read_bytes())).load()
    if not isinstance(data, dict) or not isinstance(data.get("device_traces"), list):
        raise ValueError(f"{path.name}: not a PyTorch memory snapshot (no device_traces)")
    return data
