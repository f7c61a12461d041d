"""Memory snapshots beside a capture (`profile_with_memory`): the allocator's history over the
window, in PyTorch's snapshot format (a pickle of plain dicts and lists: `segments`,
`device_traces`), which https://pytorch.org/memory_viz opens and our analysis summarises (peak,
top allocation sites).

- CUDA: the caching allocator records its history from the window's start
  (`torch.cuda.memory._record_memory_history`) and `_snapshot()` takes it at the stop.
- NPU: the same through `torch_npu.npu.memory` where the installed torch_npu has it.
- CPU: no allocator history; the profiler's own memory records (profile_memory + record_shapes +
  with_stack) are turned into the same format (`torch.cuda._memory_viz._profile_to_snapshot`). That
  is torch's Python-side parse of every event (seconds per capture: benchmarks/bench_capture_cost.py),
  so it is not done at stop but when the snapshot is written (`build`), off the training thread.
Never fatal: a failure is a note on the capture and the trace is kept.
"""
from __future__ import annotations

import contextlib
import pickle
import sys
from pathlib import Path
from typing import Any, Iterator

MAX_ENTRIES = 200_000   # allocator events kept (the history is a ring buffer of this many)
ALLOCATOR, PROFILER = "allocator", "profiler"


# While this process parses a profile in Python beside the training thread, the interpreter hands
# the GIL over this often (default 5 ms): a training thread that releases the GIL for each op would
# otherwise wait up to 5 ms to get it back after every op (the convoy effect). Measured on the CPU
# benchmark's op-heavy model: iterations during the parse 28x slower at 5 ms, 5.2x at 0.2 ms.
YIELD_INTERVAL_S = 0.0002


@contextlib.contextmanager
def gil_yielding() -> Iterator[None]:
    """sys.setswitchinterval(YIELD_INTERVAL_S) for the block (process-wide; restored after)."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(min(before, YIELD_INTERVAL_S))
    try:
        yield
    finally:
        sys.setswitchinterval(before)


def snapshot_kind(device: str, flags: dict[str, bool]) -> tuple[str | None, str | None]:
    """Pure: (how a snapshot is taken on this device, or None; a note saying why not)."""
    if device in ("cuda", "npu"):
        return ALLOCATOR, None
    if flags.get("profile_memory") and flags.get("record_shapes") and flags.get("with_stack"):
        return PROFILER, None
    return None, ("no memory snapshot: on CPU it is built from the profiler's memory records, which need "
                  "profile_record_shapes and profile_with_stack too (or profile_level: level2)")


class MemorySnapshot:
    """One capture's snapshot: start() with the window, stop() at its end, write() at export."""

    def __init__(self, kind: str, device: str):
        self.kind, self.device = kind, device
        self.data: Any = None
        self.notes: list[str] = []
        self._recording = False
        self._profile: Any = None   # PROFILER: the stopped profile, until build()

    def _memory_module(self) -> Any:
        if self.device == "npu":
            import torch_npu  # lazy: only on Ascend

            return torch_npu.npu.memory
        import torch

        return torch.cuda.memory

    def start(self) -> None:
        if self.kind != ALLOCATOR:
            return
        try:
            mem = self._memory_module()
            if self.device == "cuda":
                # Python frames only: the analysis names a site by its first frame outside torch, and
                # symbolising C++ frames made _snapshot() take 1.65 s at stop on an H200 (issue 34)
                mem._record_memory_history(max_entries=MAX_ENTRIES, stacks="python")
            else:   # torch_npu's signature is not recorded: its defaults
                mem._record_memory_history(max_entries=MAX_ENTRIES)
            self._recording = True
        except Exception as exc:
            self.notes.append(f"memory snapshot not recorded: {self.device} allocator history unavailable "
                              f"({type(exc).__name__}: {exc})")

    def stop(self, profile: Any = None) -> None:
        try:
            if self.kind == ALLOCATOR and self._recording:
                mem = self._memory_module()
                try:
                    self.data = mem._snapshot()
                finally:
                    mem._record_memory_history(enabled=None)
                    self._recording = False
            elif self.kind == PROFILER and profile is not None:
                self._profile = profile   # built at write(): torch's parse of the whole profile
        except Exception as exc:
            self.notes.append(f"memory snapshot not taken: {type(exc).__name__}: {exc}")

    @property
    def pending(self) -> bool:
        """Whether there is a snapshot to write (taken, or to build from the profile)."""
        return self.data is not None or self._profile is not None

    def build(self) -> None:
        """PROFILER: the snapshot from the stopped profile (slow: see the module docstring)."""
        profile, self._profile = self._profile, None
        if profile is None:
            return
        try:
            from torch.cuda._memory_viz import _profile_to_snapshot

            with gil_yielding():
                self.data = _profile_to_snapshot(profile)
        except Exception as exc:
            self.notes.append(f"memory snapshot not taken: {type(exc).__name__}: {exc}")

    def write(self, path: Path) -> Path | None:
        self.build()
        if self.data is None:
            return None
        with open(path, "wb") as fh:
            pickle.dump(self.data, fh)
        return path
