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

The allocator has one history per process, and turning it off clears it. `HISTORY` knows who asked
for it: the captures recording now and the standing request of `metrics.oom_snapshot` (a bounded
ring kept all run long, for the snapshot of an out-of-memory error: metrics/memory_tracking.py). A
capture's stop hands the history back to the standing request (its ring size and stacks) instead of
turning it off, and `HISTORY.recording(device)` says whether an out-of-memory error now has a
history to dump (a `profile_with_memory` window, or the standing request).
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


def memory_module(device: str) -> Any:
    """torch_npu.npu.memory for "npu", else torch.cuda.memory (imported here: only on a device)."""
    if device == "npu":
        import torch_npu  # lazy: only on Ascend

        return torch_npu.npu.memory
    import torch

    return torch.cuda.memory


class History:
    """Who keeps the allocator's history on, per device kind ("cuda", "npu"): the captures recording
    now, and one standing request ((max_entries, stacks), metrics.oom_snapshot). See the module
    docstring. Calls into the allocator may raise: the callers note it."""

    def __init__(self) -> None:
        self.standing: dict[str, tuple[int, str]] = {}
        self.captures: dict[str, int] = {}

    def keep(self, device: str, max_entries: int, stacks: str, mem: Any = None) -> None:
        """The standing request: the history on from now, a ring of `max_entries` events."""
        mem = mem if mem is not None else memory_module(device)
        if not self.captures.get(device):   # a capture recording now keeps its own ring until its stop
            mem._record_memory_history(enabled="all", context="all", stacks=stacks, max_entries=max_entries)
        self.standing[device] = (max_entries, stacks)

    def release(self, device: str, mem: Any = None) -> None:
        """The standing request withdrawn: the history off unless a capture records."""
        if self.standing.pop(device, None) is not None and not self.captures.get(device):
            mem = mem if mem is not None else memory_module(device)
            mem._record_memory_history(enabled=None)

    def capture_started(self, device: str) -> None:
        self.captures[device] = self.captures.get(device, 0) + 1

    def capture_stopped(self, device: str, mem: Any) -> None:
        """A capture's recording ended: the standing request's ring again, or the history off."""
        self.captures[device] = max(0, self.captures.get(device, 0) - 1)
        if self.captures[device]:
            return
        standing = self.standing.get(device)
        if standing is not None:
            mem._record_memory_history(enabled="all", context="all", stacks=standing[1], max_entries=standing[0])
        else:
            mem._record_memory_history(enabled=None)

    def recording(self, device: str) -> dict[str, Any] | None:
        """What records the history of `device` now (None: nothing)."""
        if self.captures.get(device):
            return {"by": "profile_with_memory", "max_entries": MAX_ENTRIES, "stacks": "python" if device == "cuda" else "all"}
        standing = self.standing.get(device)
        if standing is not None:
            return {"by": "oom_snapshot", "max_entries": standing[0], "stacks": standing[1]}
        return None


HISTORY = History()


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
        return memory_module(self.device)

    def start(self) -> None:
        if self.kind != ALLOCATOR:
            return
        try:
            mem = self._memory_module()
            if self.device == "cuda":
                # Python frames only: the analysis names a site by its first frame outside torch, and
                # symbolising C++ frames made _snapshot() take 1.65 s at stop on an H200 (issue 34)
                mem._record_memory_history(max_entries=MAX_ENTRIES, stacks="python")
            else:   # torch_npu's defaults (C++ frames too): as the captures always recorded
                mem._record_memory_history(max_entries=MAX_ENTRIES)
            self._recording = True
            HISTORY.capture_started(self.device)
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
                    self._recording = False
                    HISTORY.capture_stopped(self.device, mem)   # off, or back to oom_snapshot's ring
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
