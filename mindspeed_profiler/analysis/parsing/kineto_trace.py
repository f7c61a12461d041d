"""One Chrome / Kineto trace file (torch.profiler's *.pt.trace.json[.gz], torch_npu's
trace_view.json) -> an `Events` table plus the trace's other top-level fields."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mindspeed_profiler.core import formats

from . import jsonscan, prefetch, split_parse, typed_events
from .events import Events
from .memory_events import as_int


@dataclass
class TraceMemory:
    """What analyzers/memory_peaks.py needs beyond the Events table, taken in the same parse."""
    records: list           # memory_events.memory_record of each usable [memory] event, in file order
    n_bad: int              # unusable [memory] events
    base_ns: int            # baseTimeNanoseconds by memory_peaks' rule (an int64 > 0, else 0)
    # per Events row, its raw ts as float (the trace's value, before any baseTimeNanoseconds shift);
    # None where the rows are not exactly the trace's X events with their raw times (a B / E pair,
    # a dropped row, a dict batch...): then memory_peaks reads the file again, as before
    raw_ts: np.ndarray | None


@dataclass
class KinetoTrace:
    events: Events
    distributed: dict | None  # distributedInfo: backend / rank / world_size, when torch.distributed was up
    devices: list[dict] | None = None   # deviceProperties: id, name, total_memory_bytes (CUDA / ROCm traces)
    memory: TraceMemory | None = None   # with [memory] events only
    warnings: list[str] = field(default_factory=list)   # what of the trace's own fields was left out, and why


def read_kineto_trace(path: Path) -> KinetoTrace:
    """Parse a trace file; raises jsonscan.TraceFormatError (or OSError) when it is not one."""
    if path.stat().st_size == 0:
        raise jsonscan.TraceFormatError("empty file")
    try:
        table, rest = split_parse.read_into(path)   # two processes where a core is free
        if rest is None:
            rest = jsonscan.load_trace(path, table.add_batch, decode=typed_events.BatchDecoder())
    finally:
        prefetch.release(path)   # its bytes, when inflated ahead (parsing/prefetch.py), are parsed now
    ev = table.finish()
    base_ns = rest.get("baseTimeNanoseconds") if isinstance(rest, dict) else None
    memory = None
    if ev.n_memory:   # before the base shift below: ts + t0_us is still the raw time
        exact = table.times_exact and ev.n_bad == 0
        mem_base = base_ns if as_int(base_ns) is not None and base_ns > 0 else 0
        memory = TraceMemory(table.memory, table.memory_bad, mem_base, ev.ts + ev.t0_us if exact else None)
    if isinstance(base_ns, int) and not isinstance(base_ns, bool) and base_ns > 0:
        # newer Kineto writes ts relative to baseTimeNanoseconds (the epoch time of ts 0)
        ev.t0_us += base_ns // 1000
        if base_ns % 1000:
            ev.ts = ev.ts + (base_ns % 1000) / 1000.0
    if ev.n_raw == 0:
        raise jsonscan.TraceFormatError("the trace has no events")
    if len(ev) == 0 and not ev.process_names:
        raise jsonscan.TraceFormatError("no complete ('X') events: not a Chrome/Kineto trace")
    warnings: list[str] = []
    distributed = distributed_info(rest.get("distributedInfo") if isinstance(rest, dict) else None, path, warnings)
    return KinetoTrace(ev, distributed, device_properties(rest.get("deviceProperties") if isinstance(rest, dict) else None),
                       memory, warnings)


def distributed_info(dist: object, path: Path, warnings: list[str]) -> dict | None:
    """distributedInfo's backend / rank / world_size. A rank or world size that is none (not an
    integer from 0, resp. 1, to formats.MAX_RANK + 1: a damaged or crafted trace, 10**400) is a
    warning naming the file and the value, and unknown (None): the trace is analysed all the same."""
    if not isinstance(dist, dict):
        return None
    out = {k: dist.get(k) for k in ("backend", "rank", "world_size") if k in dist}
    for key, low in (("rank", 0), ("world_size", 1)):
        v = out.get(key)
        if key in out and not (isinstance(v, int) and not isinstance(v, bool) and low <= v <= formats.MAX_RANK + low):
            shown = repr(v) if len(repr(v)) <= 40 else f"{repr(v)[:30]}... ({len(repr(v))} characters)"
            warnings.append(f"{path.name}: distributedInfo.{key} is {shown}, not an integer from {low} to "
                            f"{formats.MAX_RANK + low}: the capture's {key} is unknown")
            out[key] = None
    return out


def device_properties(raw) -> list[dict] | None:
    """Kineto's deviceProperties (one object per GPU: id, name, totalGlobalMem in bytes, ...) as
    {id, name, total_memory_bytes}; entries without an integer id are left out."""
    if not isinstance(raw, list):
        return None
    out = []
    for d in raw:
        if not isinstance(d, dict) or isinstance(d.get("id"), bool) or not isinstance(d.get("id"), int):
            continue
        mem = d.get("totalGlobalMem")
        out.append({"id": d["id"], "name": str(d.get("name") or ""),
                    "total_memory_bytes": mem if isinstance(mem, int) and not isinstance(mem, bool) and mem > 0 else None})
    return out or None


def event_columns(ev: Events) -> dict:
    """The events as plain columns (absolute microseconds), for analysis.db."""
    return {"names": [str(x) for x in ev.names], "cats": [str(x) for x in ev.cats],
            "pids": [str(x) for x in ev.pids], "tids": [str(x) for x in ev.tids],
            "name": ev.name, "cat": ev.cat, "pid": ev.pid, "tid": ev.tid,
            "ts": ev.ts + ev.t0_us, "dur": ev.dur}
