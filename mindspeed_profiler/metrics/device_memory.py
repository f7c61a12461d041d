"""A device's caching allocator as the memory tracking reads it: torch.cuda on a GPU, torch_npu.npu
on an Ascend NPU (the same functions, the same statistics' names), asked only of a device the
process has already used (never imports torch, never initialises a device).

What is called, with the signatures of the released sources (torch 2.13's `torch.cuda.memory`,
torch_npu's `torch_npu.npu.memory`: mindspeed_profiler/data/torch_npu_memory.json; tests bind every
call of the fakes against them):

    reset_peak_memory_stats(device=None)          a stage's entry: the peaks start again
    memory_stats_as_nested_dict(device=None)      a stage's exit: allocated / reserved peaks, one call
                                                  (memory_stats() flattens the same dict in Python)
    mem_get_info(device=None)                     free and total, for an out-of-memory record
    get_device_properties(device).total_memory    the capacity
    _record_memory_history(enabled, context=..., stacks=..., max_entries=...)   the allocator's history
    _snapshot(device=None)                        ... taken at an out-of-memory error
"""
from __future__ import annotations

import sys
from typing import Any, Iterator

NPU, CUDA = "npu", "cuda"
# the statistics an out-of-memory record keeps (memory_stats_as_nested_dict's [name]["all"][field])
OOM_STATS = ("allocated_bytes", "reserved_bytes", "active_bytes", "inactive_split_bytes", "requested_bytes")
OOM_COUNTS = ("num_alloc_retries", "num_ooms", "num_device_alloc", "num_device_free")


def _namespaces() -> list[tuple[str, Any, Any]]:
    """(kind, the device namespace, its memory module) of the device libraries already imported:
    torch_npu first (with it loaded, torch.cuda is not the training device)."""
    out = []
    npu_pkg = sys.modules.get("torch_npu")
    if npu_pkg is not None:
        ns = getattr(npu_pkg, "npu", None)
        mem = sys.modules.get("torch_npu.npu.memory") or getattr(ns, "memory", None)
        if ns is not None:
            out.append((NPU, ns, mem))
    torch = sys.modules.get("torch")
    if torch is not None:
        ns = getattr(torch, "cuda", None)
        if ns is not None:
            out.append((CUDA, ns, getattr(ns, "memory", None)))
    return out


def _used() -> Iterator[tuple[str, Any, Any]]:
    """_namespaces() of the devices this process has used: available and initialised."""
    for kind, ns, mem in _namespaces():
        try:
            if not ns.is_available():
                continue
            initialised = getattr(ns, "is_initialized", None)
            if initialised is not None and not initialised():
                continue
        except Exception:
            continue
        yield kind, ns, mem


def used_namespaces() -> list[Any]:
    """The device namespaces (torch_npu.npu, torch.cuda) this process has used. Never raises."""
    return [ns for _kind, ns, _mem in _used()]


class DeviceMemory:
    """One process's device allocator (its current device). Every method may raise: the callers
    (stage_memory.py, oom.py) catch and note it."""

    __slots__ = ("kind", "ns", "mem", "_nested", "_reset")

    def __init__(self, kind: str, ns: Any, mem: Any):
        self.kind, self.ns, self.mem = kind, ns, mem
        self._nested = ns.memory_stats_as_nested_dict
        self._reset = ns.reset_peak_memory_stats

    def reset_peaks(self) -> None:
        self._reset()

    def peaks(self) -> tuple[int, int]:
        """(allocated, reserved) peaks since the last reset, bytes."""
        s = self._nested()
        return int(s["allocated_bytes"]["all"]["peak"]), int(s["reserved_bytes"]["all"]["peak"])

    def current(self) -> tuple[int, int]:
        """(allocated, reserved) now, bytes."""
        s = self._nested()
        return int(s["allocated_bytes"]["all"]["current"]), int(s["reserved_bytes"]["all"]["current"])

    def stats(self) -> dict[str, int]:
        """The allocator's statistics an out-of-memory record keeps: `<name>_current` / `_peak` of
        OOM_STATS, and the counts of OOM_COUNTS (what the release has of them)."""
        s = self._nested()
        out: dict[str, int] = {}
        for name in OOM_STATS:
            pools = s.get(name)
            every = pools.get("all") if isinstance(pools, dict) else None
            if isinstance(every, dict):
                for field in ("current", "peak"):
                    if isinstance(every.get(field), int):
                        out[f"{name}_{field}"] = every[field]
        for name in OOM_COUNTS:
            if isinstance(s.get(name), int):
                out[name] = s[name]
        return out

    def free_and_total(self) -> tuple[int, int]:
        free, total = self.ns.mem_get_info()
        return int(free), int(total)

    def capacity(self) -> int:
        return int(self.ns.get_device_properties(self.ns.current_device()).total_memory)

    def name(self) -> str:
        return str(self.ns.get_device_name())

    def record_history(self, max_entries: int, stacks: str) -> None:
        """The allocator keeps its last `max_entries` events with their stacks (`stacks`: "python"
        or "all" (C++ frames too: slow to take, torchtitan #3628))."""
        self.mem._record_memory_history(enabled="all", context="all", stacks=stacks, max_entries=max_entries)

    def stop_history(self) -> None:
        self.mem._record_memory_history(enabled=None)

    def snapshot(self) -> Any:
        return self.mem._snapshot()


def find_device() -> DeviceMemory | None:
    """The device this process uses (torch_npu.npu, else torch.cuda), or None: a CPU, a device
    never used, a library without the functions."""
    for kind, ns, mem in _used():
        if mem is not None and hasattr(ns, "memory_stats_as_nested_dict"):
            return DeviceMemory(kind, ns, mem)
    return None
