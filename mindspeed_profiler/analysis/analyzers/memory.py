"""Memory over a capture's window, from a PyTorch memory snapshot: per device, the peak of the
allocated bytes and the allocation sites holding the most memory at that peak.

Replay of the allocator's trace in order: `alloc` adds its size, `free_completed` (or, where a
trace has no completion events, `free_requested`) removes it. The trace starts with the window,
so what was already allocated (the baseline) is found from the end state: the active blocks of the
snapshot's segments minus the net of the trace. A site is the first frame of an allocation's stack
outside torch's own code (else its innermost frame).
"""
from __future__ import annotations

from mindspeed_profiler.analysis.models.rows import Field, RowModel, each_capture

_INTERNAL = ("torch/", "<built-in", "nn.Module:", "<frozen")


def _site(frames: list) -> str:
    def text(f: dict) -> str:
        fn, line, name = f.get("filename"), f.get("line"), f.get("name", "")
        return f"{fn}:{line} {name}" if fn and fn != "none" else str(name)
    texts = [text(f) for f in frames if isinstance(f, dict)]
    return next((t for t in texts if not any(t.startswith(p) or f" {p}" in t for p in _INTERNAL)), texts[0] if texts else "?")


site_of = _site   # the name the out-of-memory records' analysis imports (analyzers/oom.py)


def _free_action(trace: list) -> str:
    return "free_completed" if any(e.get("action") == "free_completed" for e in trace) else "free_requested"


def _event_ok(e) -> bool:
    """An allocator event the replay can use: a dict with a text action and an integer size."""
    return (isinstance(e, dict) and isinstance(e.get("action"), str) and isinstance(e.get("size"), int)
            and not isinstance(e.get("size"), bool) and e.get("size") >= 0 and isinstance(e.get("addr"), int))


def device_memory(trace: list, segments: list, device: int, top_n: int) -> dict | None:
    n_in = len(trace)
    trace = [e for e in trace if _event_ok(e)]
    n_bad = n_in - len(trace)
    allocs = [e for e in trace if e.get("action") == "alloc"]
    if not allocs:
        return None
    free = _free_action(trace)
    cur = peak = 0
    peak_at = -1
    sizes: dict = {}
    for k, e in enumerate(trace):
        if e.get("action") == "alloc":
            sizes[e["addr"]] = e["size"]
            cur += e["size"]
            if cur > peak:
                peak, peak_at = cur, k
        elif e.get("action") == free and e.get("addr") in sizes:
            cur -= sizes.pop(e["addr"])
    net_end = cur
    live: dict = {}
    for e in trace[:peak_at + 1]:   # the allocations alive at the peak
        if e.get("action") == "alloc":
            live[e["addr"]] = e
        elif e.get("action") == free:
            live.pop(e.get("addr"), None)
    sites: dict[str, list] = {}
    for e in live.values():
        frames = e.get("frames")
        s = sites.setdefault(_site(frames if isinstance(frames, list) else []), [0, 0])
        s[0] += e["size"]
        s[1] += 1
    active_end = sum(b["size"] for seg in segments if isinstance(seg, dict) and seg.get("device", device) == device
                     for b in (seg.get("blocks") if isinstance(seg.get("blocks"), list) else [])
                     if isinstance(b, dict) and b.get("state") == "active_allocated" and isinstance(b.get("size"), int))
    baseline = max(0, active_end - net_end) if active_end else 0
    return MEMORY_PEAKS.row(device_id=device, peak_bytes=baseline + peak, peak_in_window_bytes=peak, baseline_bytes=baseline,
                            n_allocs=len(allocs), n_bad_events=n_bad,
                            top_sites=[MEMORY_SITES.row(site=k, bytes=v[0], count=v[1])
                                       for k, v in sorted(sites.items(), key=lambda kv: -kv[1][0])[:top_n]])


def memory_summary(snapshot: dict, top_n: int) -> list[dict]:
    """One row per device whose trace has allocations."""
    segments = snapshot.get("segments") if isinstance(snapshot.get("segments"), list) else []
    out = []
    for device, trace in enumerate(snapshot.get("device_traces") or []):
        row = device_memory(trace or [], segments, device, top_n) if isinstance(trace, list) else None
        if row is not None:
            out.append(row)
    return out


def npu_memory_summary(records: list[dict]) -> list[dict]:
    """Ascend memory records (memory_record.csv / the db's MEMORY_RECORD) per component: the peaks
    of allocated, reserved and active bytes and how many records. Components: PTA (the PyTorch
    allocator), GE (graph engine), PTA+GE, APP (the process: reserved only)."""
    agg: dict[str, dict] = {}
    for r in records:
        a = agg.get(r["component"])
        if a is None:
            a = agg[r["component"]] = NPU_MEMORY.row(component=r["component"], n_records=0, peak_allocated_bytes=None,
                                                     peak_reserved_bytes=None, peak_active_bytes=None)
        a["n_records"] += 1
        for k in ("allocated", "reserved", "active"):
            v = r.get(f"{k}_bytes")
            if v is not None and (a[f"peak_{k}_bytes"] is None or v > a[f"peak_{k}_bytes"]):
                a[f"peak_{k}_bytes"] = v
    return [agg[k] for k in sorted(agg)]


# -- rows (rows.py): summary.json captures[*].memory


def _memory(key: str):
    return lambda c: (c.get("memory") or {}).get(key) if isinstance(c.get("memory"), dict) else None


def _sites(c: dict) -> list[dict]:
    return [{**s, "device": d.get("device")} for d in _memory("devices")(c) or [] for s in d.get("top_sites") or []]


MEMORY_PEAKS = RowModel(
    "memory_peaks", "device of a capture's PyTorch memory snapshot", "captures[*].memory.devices[*]",
    table="memory_peaks", method="memory_peaks", holds=("top_sites",), select=each_capture(_memory("devices")), fields=(
        Field("device", "id", "the device index", code="device_id"),
        Field("peak_bytes", "bytes", "the peak of allocated bytes (baseline + the window's peak)"),
        Field("peak_in_window_bytes", "bytes", "the peak reached by the allocations of the recorded window"),
        Field("baseline_bytes", "bytes", "allocated before the window"),
        Field("n_allocs", "count", "allocations in the trace"),
        Field("n_bad_events", "count", "allocator events left out (unusable)"),
    ))
MEMORY_SITES = RowModel(
    "memory_sites", "allocation site holding memory at a device's peak (the top ones)",
    "captures[*].memory.devices[*].top_sites[*]", table="memory_sites", method="memory_sites",
    select=each_capture(_sites), fields=(
        Field("device", "id", "the device index (of the devices row)", computed=True, code="device_id"),
        Field("site", "text", "the first frame outside torch's own code"),
        Field("bytes", "bytes", "held at the peak"),
        Field("count", "count", "allocations"),
    ))
NPU_MEMORY = RowModel(
    "npu_memory", "component of an Ascend capture's memory records", "captures[*].memory.npu[*]",
    table="npu_memory", method="npu_memory", select=each_capture(_memory("npu")), fields=(
        Field("component", "text", "PTA (the PyTorch allocator), GE, PTA+GE, APP (the process: reserved only)"),
        Field("n_records", "count", "records of memory_record.csv / MEMORY_RECORD"),
        Field("peak_allocated_bytes", "bytes", "the peak of allocated bytes"),
        Field("peak_reserved_bytes", "bytes", "the peak of reserved bytes"),
        Field("peak_active_bytes", "bytes", "the peak of active bytes"),
    ))
