"""A capture's PyTorch memory snapshot (`*.memory_snapshot.pickle`, beside a torch or npu capture):
read (plain data only, bounded: parsing/memory_snapshot.py) and summarised (analyzers/memory.py).
Whatever is wrong with it, a refused pickle, a file of the wrong shape, is a warning: the capture's
trace is analysed all the same."""
from __future__ import annotations

from pathlib import Path

from ..analyzers.memory import memory_summary
from mindspeed_profiler.analysis.pipeline.discover import rel
from ..parsing.memory_snapshot import read_memory_snapshot


def snapshot_memory(root: Path, path: Path, top_n: int) -> tuple[dict | None, str | None]:
    """({"snapshot": path, "devices": rows}, None), or (None, the warning)."""
    try:
        return {"snapshot": rel(root, path), "devices": memory_summary(read_memory_snapshot(path), top_n)}, None
    except MemoryError:
        raise
    except Exception as exc:  # noqa: BLE001 - the snapshot is an extra: its failure never fails the capture
        return None, f"{path.name}: memory snapshot unreadable ({type(exc).__name__}: {str(exc)[:300]})"
