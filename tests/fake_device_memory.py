"""A fake device allocator for the memory tracking's CPU tests: the functions of `torch.cuda` /
`torch.cuda.memory` and of `torch_npu.npu` / `torch_npu.npu.memory` that metrics/device_memory.py
calls, over a small model of a caching allocator.

Why a fake: this machine has no GPU and no NPU (and torch_npu needs CANN). What keeps it honest:
every call is bound first against the real function's signature, so a keyword the release lacks
raises TypeError here as it would there:
- CUDA: `inspect.signature` of the installed torch's own functions, taken before they are replaced;
- NPU: mindspeed_profiler/data/torch_npu_memory.json, read from torch-npu's released wheels by
  tools/extract_torch_npu_memory.py (`_record_memory_history(enabled, *args, **kwargs)` is bound again
  against `_record_memory_history_impl`, the function it forwards to, as the real one does).
The fake's own parameters are the real ones in order, named as torch.cuda's (torch_npu calls
`get_device_properties`' and `get_device_name`'s `device_name`): tests/test_device_memory.py compares them.

The model, as PyTorch's CUDACachingAllocator behaves where the tracking can see it: `alloc(size)`
rounds to 512 bytes, takes a cached free block or reserves a new segment (rounded to 2 MiB), and past
the capacity records an `oom` trace entry (size = what was asked, `device_free`) and raises
`torch.OutOfMemoryError` with CUDA's (or the NPU's) message; `free(addr)` returns the block to the
cache (reserved stays). `memory_stats_as_nested_dict()` has the real nesting
(`["allocated_bytes"]["all"]["peak"]`), `reset_peak_memory_stats()` sets every peak to its current
value, and with `_record_memory_history(enabled="all", max_entries=N)` the allocator keeps its last N
events (`alloc`, `free_requested`, `free_completed`, `segment_alloc`, `oom`) with the caller's Python
frames and `time_us` (Unix microseconds), which `_snapshot()` returns in PyTorch's snapshot format
(`segments` with `blocks`, `device_traces`).

Usage: `alloc = FakeAllocator(capacity=8 * GIB); install_cuda(monkeypatch, alloc)` (or `install_npu`).
"""
from __future__ import annotations

import inspect
import json
import sys
import time
import traceback
import types
from collections import deque
from pathlib import Path
from typing import Any, Callable

import mindspeed_profiler
from fake_torch_npu import signature_of

GIB, MIB = 2**30, 2**20
NPU_SNAPSHOT = Path(mindspeed_profiler.__file__).parent / "data" / "torch_npu_memory.json"
# what device_memory.py calls on the namespace (torch.cuda / torch_npu.npu) and on its memory module
NS_FUNCTIONS = ("is_available", "is_initialized", "current_device", "get_device_properties", "get_device_name",
                "mem_get_info", "memory_stats", "memory_stats_as_nested_dict", "reset_peak_memory_stats",
                "max_memory_allocated", "max_memory_reserved", "memory_allocated", "memory_reserved")
MEMORY_FUNCTIONS = ("_record_memory_history", "_snapshot")
_ROUND, _SEGMENT = 512, 2 * MIB


def npu_snapshot(version: str | None = None) -> dict[str, Any]:
    doc = json.loads(NPU_SNAPSHOT.read_text(encoding="utf-8"))
    return doc["releases"][version or doc["newest"]]


def _gib(n: int) -> str:
    return f"{n / GIB:.2f} GiB"


class FakeAllocator:
    """One device's caching allocator (see the module docstring). `calls`: (function, arguments)."""

    def __init__(self, capacity: int = 8 * GIB, name: str = "NVIDIA H100 80GB HBM3", kind: str = "cuda",
                 initialized: bool = True):
        self.capacity, self.device_name, self.kind, self.initialized = capacity, name, kind, initialized
        self.blocks: dict[int, tuple[int, list]] = {}     # live: addr -> (size, frames)
        self.cached: list[tuple[int, int]] = []           # free blocks in reserved segments: (addr, size)
        self.segments: list[tuple[int, int]] = []         # (address, size)
        self.allocated = self.reserved = self.active = 0
        self.peak = {"allocated_bytes": 0, "reserved_bytes": 0, "active_bytes": 0}
        self.num_ooms = self.num_alloc_retries = 0
        self.history: deque | None = None
        self.context = self.stacks = None
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self._next = 0x7F0000000000

    # ------------------------------------------------------------------ what "tensors" do

    def alloc(self, size: int) -> int:
        size = max(_ROUND, -(-size // _ROUND) * _ROUND)
        frames = self._frames()
        for i, (addr, have) in enumerate(self.cached):
            if have >= size:
                del self.cached[i]
                break
        else:
            seg = -(-size // _SEGMENT) * _SEGMENT
            if self.reserved + seg > self.capacity:
                self.num_ooms += 1
                free = self.capacity - self.reserved
                self._trace("oom", 0, size, frames, device_free=free)
                raise self._oom_error(size, free)
            addr = self._next
            self._next += seg
            self.segments.append((addr, seg))
            self.reserved += seg
            self._trace("segment_alloc", addr, seg, frames)
            if seg > size:
                self.cached.append((addr + size, seg - size))
        self.blocks[addr] = (size, frames)
        self.allocated += size
        self.active += size
        self._trace("alloc", addr, size, frames)
        self._peaks()
        return addr

    def free(self, addr: int) -> None:
        size, _ = self.blocks.pop(addr)
        frames = self._frames()
        self._trace("free_requested", addr, size, frames)
        self.allocated -= size
        self.active -= size
        self.cached.append((addr, size))
        self._trace("free_completed", addr, size, frames)

    def _oom_error(self, size: int, free: int) -> BaseException:
        import torch

        if self.kind == "npu":   # torch_npu's NPUCachingAllocator message (libtorch_npu.so, 2.14.0)
            msg = (f"NPU out of memory. Tried to allocate {_gib(size)} (NPU 0; {_gib(self.capacity)} total capacity; "
                   f"{_gib(self.allocated)} already allocated; {_gib(self.active)} current active; {_gib(free)} free; "
                   f"{_gib(self.reserved)} reserved in total by PyTorch)")
        else:                    # CUDACachingAllocator's (torch 2.x)
            msg = (f"CUDA out of memory. Tried to allocate {_gib(size)}. GPU 0 has a total capacity of "
                   f"{_gib(self.capacity)} of which {_gib(free)} is free. Of the allocated memory {_gib(self.allocated)} "
                   f"is allocated by PyTorch, and {_gib(self.reserved - self.allocated)} is reserved by PyTorch but "
                   "unallocated.")
        return torch.OutOfMemoryError(msg)

    def _frames(self) -> list[dict[str, Any]] | None:
        if self.history is None or self.context is None:
            return None
        stack = traceback.extract_stack()[:-2]   # up to the caller of alloc() / free(), innermost last
        return [{"filename": f.filename, "line": f.lineno, "name": f.name} for f in reversed(stack)]

    def _trace(self, action: str, addr: int, size: int, frames: list | None, **extra: Any) -> None:
        if self.history is None:
            return
        entry = {"action": action, "addr": addr, "size": size, "stream": 0, "time_us": time.time_ns() // 1000,
                 "frames": frames or [], **extra}
        self.history.append(entry)

    def _peaks(self) -> None:
        for name, now in (("allocated_bytes", self.allocated), ("reserved_bytes", self.reserved),
                          ("active_bytes", self.active)):
            self.peak[name] = max(self.peak[name], now)

    # ------------------------------------------------------------------ the namespace's functions
    # (parameter names as the real ones; the wrappers bind every call against the real signature)

    def is_available(self) -> bool:
        return True

    def is_initialized(self) -> bool:
        return self.initialized

    def current_device(self) -> int:
        return 0

    def get_device_properties(self, device: Any = None) -> Any:
        return types.SimpleNamespace(total_memory=self.capacity, name=self.device_name)

    def get_device_name(self, device: Any = None) -> str:
        return self.device_name

    def mem_get_info(self, device: Any = None) -> tuple[int, int]:
        return self.capacity - self.reserved, self.capacity

    def memory_stats_as_nested_dict(self, device: Any = None) -> dict[str, Any]:
        def stat(name: str, now: int) -> dict[str, Any]:
            return {"all": {"current": now, "peak": self.peak[name], "allocated": 0, "freed": 0},
                    "small_pool": {"current": 0, "peak": 0}, "large_pool": {"current": now, "peak": self.peak[name]}}
        return {"allocated_bytes": stat("allocated_bytes", self.allocated),
                "reserved_bytes": stat("reserved_bytes", self.reserved),
                "active_bytes": stat("active_bytes", self.active),
                "num_alloc_retries": self.num_alloc_retries, "num_ooms": self.num_ooms}

    def memory_stats(self, device: Any = None) -> dict[str, Any]:
        out: dict[str, Any] = {}

        def walk(prefix: str, obj: Any) -> None:
            if isinstance(obj, dict):
                for k, v in obj.items():
                    walk(f"{prefix}.{k}" if prefix else k, v)
            else:
                out[prefix] = obj
        walk("", self.memory_stats_as_nested_dict())
        return dict(sorted(out.items()))

    def reset_peak_memory_stats(self, device: Any = None) -> None:
        self.peak = {"allocated_bytes": self.allocated, "reserved_bytes": self.reserved, "active_bytes": self.active}

    def max_memory_allocated(self, device: Any = None) -> int:
        return self.peak["allocated_bytes"]

    def max_memory_reserved(self, device: Any = None) -> int:
        return self.peak["reserved_bytes"]

    def memory_allocated(self, device: Any = None) -> int:
        return self.allocated

    def memory_reserved(self, device: Any = None) -> int:
        return self.reserved

    # ------------------------------------------------------------------ the memory module's

    def _record_memory_history(self, enabled: Any = "all", context: Any = "all", stacks: str = "all",
                               max_entries: int = sys.maxsize, device: Any = None, clear_history: bool = False,
                               compile_context: bool = False, global_record_annotations: bool = False,
                               skip_actions: Any = None) -> None:
        if enabled is None:
            self.history, self.context, self.stacks = None, None, None
            return
        kept = list(self.history or ()) if self.history is not None and not clear_history else []
        self.history = deque(kept, maxlen=max_entries)
        self.context, self.stacks = context, stacks

    def _snapshot(self, device: Any = None, augment_with_fx_traces: bool = False) -> dict[str, Any]:
        segments = []
        for base, seg in self.segments:
            blocks = [{"address": a, "size": s, "requested_size": s, "state": "active_allocated", "frames": f or []}
                      for a, (s, f) in sorted(self.blocks.items()) if base <= a < base + seg]
            blocks += [{"address": a, "size": s, "requested_size": 0, "state": "inactive", "frames": []}
                       for a, s in sorted(self.cached) if base <= a < base + seg]
            segments.append({"device": 0, "address": base, "total_size": seg, "stream": 0, "segment_type": "large",
                             "allocated_size": sum(b["size"] for b in blocks if b["state"] == "active_allocated"),
                             "active_size": sum(b["size"] for b in blocks if b["state"] == "active_allocated"),
                             "blocks": sorted(blocks, key=lambda b: b["address"])})
        return {"segments": segments, "device_traces": [list(self.history or ())],
                "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": None}}


# ---------------------------------------------------------------------------------- installing


def checked(alloc: FakeAllocator, qualname: str, sig: inspect.Signature, impl: Callable[..., Any],
            forward: inspect.Signature | None = None) -> Callable[..., Any]:
    """`impl` behind the real signature: the arguments bound (TypeError as the real function), then
    passed by name; `forward`: the signature the real function forwards *args / **kwargs to."""
    def fn(*args: Any, **kwargs: Any) -> Any:
        bound = sig.bind(*args, **kwargs)
        if forward is not None:   # _record_memory_history(enabled, *args, **kwargs) -> the impl's parameters
            given = dict(bound.arguments)
            inner = forward.bind(given.pop("enabled", "all"), *given.pop("args", ()), **given.pop("kwargs", {}))
            inner.apply_defaults()
            alloc.calls.append((qualname, dict(inner.arguments)))
            return impl(**inner.arguments)
        alloc.calls.append((qualname, dict(bound.arguments)))
        return impl(*bound.args, **bound.kwargs)
    fn.__signature__ = sig   # what inspect sees: the real one
    fn.__name__ = qualname.rsplit(".", 1)[-1]
    return fn


def install_cuda(monkeypatch: Any, alloc: FakeAllocator) -> FakeAllocator:
    """The allocator as torch.cuda's (and torch.cuda.memory's) functions, for one test."""
    import torch
    import torch.cuda.memory as cuda_memory

    for name in NS_FUNCTIONS:
        real = getattr(torch.cuda, name)
        monkeypatch.setattr(torch.cuda, name, checked(alloc, f"torch.cuda.{name}", inspect.signature(real), getattr(alloc, name)))
    for name in MEMORY_FUNCTIONS:
        real = getattr(cuda_memory, name)
        monkeypatch.setattr(cuda_memory, name, checked(alloc, f"torch.cuda.memory.{name}", inspect.signature(real),
                                                       getattr(alloc, name)))
    return alloc


def install_npu(monkeypatch: Any, alloc: FakeAllocator, version: str | None = None) -> FakeAllocator:
    """`torch_npu`, `torch_npu.npu` and `torch_npu.npu.memory` in sys.modules for one test, holding
    only the memory functions, each bound against the release's recorded signature."""
    snap = npu_snapshot(version)["functions"]
    pkg, ns, mem = (types.ModuleType(n) for n in ("torch_npu", "torch_npu.npu", "torch_npu.npu.memory"))
    pkg.npu, ns.memory = ns, mem
    for name in NS_FUNCTIONS:
        q = f"torch_npu.npu.{name}"
        setattr(ns, name, checked(alloc, q, signature_of(snap[q]), getattr(alloc, name)))
    impl = signature_of(snap["torch_npu.npu.memory._record_memory_history_impl"])
    mem._record_memory_history = checked(alloc, "torch_npu.npu.memory._record_memory_history",
                                         signature_of(snap["torch_npu.npu.memory._record_memory_history"]),
                                         alloc._record_memory_history, forward=impl)
    mem._snapshot = checked(alloc, "torch_npu.npu.memory._snapshot", signature_of(snap["torch_npu.npu.memory._snapshot"]),
                            alloc._snapshot)
    for module in (pkg, ns, mem):
        monkeypatch.setitem(sys.modules, module.__name__, module)
    alloc.kind = "npu"
    return alloc
