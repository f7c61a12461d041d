"""Out-of-memory records: what an out-of-memory error (or a host watermark crossed) leaves on disk.

- `oom_kind(exc)`: a device out-of-memory error (`torch.OutOfMemoryError`, which torch_npu raises
  too; older torch_npu raised a RuntimeError "NPU out of memory"), a host one (`MemoryError`, torch's
  "DefaultCPUAllocator: can't allocate memory"), or None.
- `tried_bytes(message)`: what the failed allocation asked for, from the allocator's message.
- `host_section()`, `device_section(dev)`: the host's and the device's memory at that moment.
- `memory_record(...)`: pure, the record (docs/memory.md "The out-of-memory record").
- `write_record(path, record)`, `dump_snapshot(dev, path)`: the I/O, each bounded and never raising
  (a failure is returned as a note: the caller warns; the training's own exception goes on unchanged).
"""
from __future__ import annotations

import os
import pickle
import re
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

from mindspeed_profiler.core.fileio import write_atomic
from mindspeed_profiler.runtime.host_memory import HostPeak, available_bytes, host_limit

DEVICE_OOM, HOST_OOM, HOST_WATERMARK = "device_oom", "host_oom", "host_watermark"
RECORD_KINDS = (DEVICE_OOM, HOST_OOM, HOST_WATERMARK)
RECORD_SCHEMA = 1
MESSAGE_MAX = 2000          # characters of the exception's message kept
PYTHON_TOP = 10             # tracemalloc's largest allocation sites kept (when tracemalloc is on)
_UNITS = {"b": 1, "bytes": 1, "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
          "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12}
_TRIED = re.compile(r"[Tt]ried to allocate\s+([0-9]+(?:\.[0-9]+)?)\s*([KMGT]i?B|bytes|B)\b", re.IGNORECASE)
_CPU_TRIED = re.compile(r"you tried to allocate\s+([0-9]+)\s+bytes", re.IGNORECASE)
_DEVICE_WORDS = ("CUDA out of memory", "NPU out of memory", "HIP out of memory", "XPU out of memory")
_HOST_WORDS = ("DefaultCPUAllocator: can't allocate memory", "host out of memory")


def oom_kind(exc: BaseException | None) -> str | None:
    """DEVICE_OOM, HOST_OOM or None for an exception escaping a stage."""
    if exc is None:
        return None
    torch = sys.modules.get("torch")
    oom_class = getattr(torch, "OutOfMemoryError", None) if torch is not None else None
    try:
        if isinstance(oom_class, type) and isinstance(exc, oom_class):
            return DEVICE_OOM
        if isinstance(exc, MemoryError):
            return HOST_OOM
        if isinstance(exc, RuntimeError):
            head = str(exc)[:300]
            if any(w in head for w in _DEVICE_WORDS):
                return DEVICE_OOM
            if any(w in head for w in _HOST_WORDS):
                return HOST_OOM
    except Exception:   # a message that cannot be made: not ours to judge
        return None
    return None


def tried_bytes(message: str) -> int | None:
    """Pure: the bytes the failed allocation asked for ("Tried to allocate 2.00 GiB", CPU's "you
    tried to allocate 123 bytes"), or None."""
    m = _TRIED.search(message)
    if m:
        return int(float(m.group(1)) * _UNITS[m.group(2).lower()])
    m = _CPU_TRIED.search(message)
    return int(m.group(1)) if m else None


def python_top(limit: int = PYTHON_TOP) -> list[dict[str, Any]] | None:
    """tracemalloc's largest allocation sites now (None when tracemalloc is not tracing: starting
    it here would see nothing of what came before)."""
    if not tracemalloc.is_tracing():
        return None
    try:
        stats = tracemalloc.take_snapshot().statistics("lineno")[:limit]
    except Exception:
        return None
    return [{"site": f"{s.traceback[0].filename}:{s.traceback[0].lineno}", "bytes": s.size, "count": s.count}
            for s in stats]


def host_section(peak: HostPeak | None = None) -> dict[str, Any]:
    """The host's memory now: this process's resident size and peak (since the last stage entry when
    the peak resets), what it may use and what is still free of that, tracemalloc's top sites."""
    reader = peak or HostPeak()
    try:
        rss, hwm = reader.rss_and_peak()
    finally:
        if peak is None:
            reader.close()
    limit, source, usage = host_limit()
    out: dict[str, Any] = {"rss_bytes": rss, "peak_bytes": hwm, "limit_bytes": limit, "limit_source": source,
                           "available_bytes": available_bytes(limit, source, usage)}
    top = python_top()
    if top is not None:
        out["python_top"] = top
    return out


def device_section(dev: Any, history: dict[str, Any] | None) -> tuple[dict[str, Any] | None, list[str]]:
    """The device allocator's statistics, free / total and capacity (what can be read of them), and
    its history's settings; plus notes for what could not be read."""
    if dev is None:
        return None, []
    out: dict[str, Any] = {"kind": dev.kind, "history": history}
    notes = []
    for key, read in (("stats", dev.stats), ("free_and_total", dev.free_and_total), ("capacity_bytes", dev.capacity)):
        try:
            value = read()
        except Exception as exc:
            notes.append(f"device {key} not read: {type(exc).__name__}: {exc}")
            continue
        if key == "free_and_total":
            out["free_bytes"], out["total_bytes"] = value
        else:
            out[key] = value
    return out, notes


def memory_record(kind: str, *, role: str, rank: int, run_id: str | None, stage: str | None, iteration: int | None,
                  exc: BaseException | None, device: dict[str, Any] | None, host: dict[str, Any],
                  stage_peaks: dict[str, list[int | None]], recent: list[tuple[str, int | None, int, int | None]],
                  notes: list[str], watermark: dict[str, Any] | None = None) -> dict[str, Any]:
    """Pure: one record (docs/memory.md). `stage_peaks`: stage -> the run's (device allocated, device
    reserved, host) peaks so far; `recent`: the last stage calls' (stage, iteration, start_ns, end_ns)."""
    message = None
    if exc is not None:
        try:
            message = str(exc)[:MESSAGE_MAX]
        except Exception as err:
            message = f"(the message could not be made: {type(err).__name__})"
    return {
        "type": "memory_record", "schema": RECORD_SCHEMA, "kind": kind, "run_id": run_id, "role": role, "rank": rank,
        "host_name": _hostname(), "pid": os.getpid(), "time_ns": time.time_ns(), "stage": stage, "iteration": iteration,
        "exception": None if exc is None else {"type": f"{type(exc).__module__}.{type(exc).__qualname__}",
                                               "message": message},
        "tried_bytes": tried_bytes(message) if message else None,
        "device": device, "host": host, "watermark": watermark,
        "stage_peaks": {s: {"device_allocated_peak": p[0], "device_reserved_peak": p[1], "host_peak": p[2]}
                        for s, p in stage_peaks.items()},
        "stage_calls": [[s, it, a, b] for s, it, a, b in recent],
        "snapshot": None, "notes": list(notes),
    }


def _hostname() -> str:
    try:
        return os.uname().nodename
    except Exception:
        return "?"


def write_record(path: Path, record: dict[str, Any]) -> str | None:
    """Write the record as JSON (atomically); the failure as a note, or None."""
    import json

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        data = json.dumps(record, separators=(",", ":"), default=str).encode("utf-8")
        write_atomic(path, lambda fh: fh.write(data))
        return None
    except Exception as exc:
        return f"{path}: not written: {type(exc).__name__}: {exc}"


def dump_snapshot(dev: Any, path: Path) -> tuple[dict[str, Any] | None, str | None]:
    """The allocator's snapshot (its history ring, Python stacks: bounded) pickled to `path`:
    ({file, bytes, seconds, entries}, None) or (None, the note)."""
    t0 = time.perf_counter()
    try:
        data = dev.snapshot()
        traces = data.get("device_traces") if isinstance(data, dict) else None
        entries = sum(len(t) for t in traces if isinstance(t, list)) if isinstance(traces, list) else None
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, lambda fh: pickle.dump(data, fh, protocol=pickle.HIGHEST_PROTOCOL))
        return {"file": path.name, "bytes": path.stat().st_size, "seconds": round(time.perf_counter() - t0, 6),
                "entries": entries}, None
    except Exception as exc:
        return None, f"memory snapshot not written ({path.name}): {type(exc).__name__}: {exc}"
