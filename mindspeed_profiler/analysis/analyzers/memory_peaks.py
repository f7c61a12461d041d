"""Peak memory of a capture from its raw memory records, per device: Kineto's `[memory]` events
(torch.profiler with profile_memory=True) and torch_npu's memory export (memory_record.csv and
operator_memory.csv, or the db's MEMORY_RECORD and OP_MEMORY). Where memory.py replays a PyTorch
memory snapshot, this reads what the profiler itself recorded. See docs/diagnosis.md, "Peak memory".

Kineto. Each `[memory]` instant event (ph "i") is one allocator call: `Bytes` (> 0 an allocation,
< 0 a free), `Total Allocated` and `Total Reserved` (the allocator's totals after the call: the
caching allocator's allocated_bytes / reserved_bytes current, CPU's allocated with reserved 0;
torch 1.x traces carry neither), `Device Type` (c10::DeviceType: 0 CPU, 1 CUDA, 20 PrivateUse1,
...) and `Device Id` (-1 for CPU). Per device: the peak of Total Allocated and its time (the first
event reaching it), the peak of Total Reserved, the peak of the running sum of Bytes from the
window's start (what torch 1.x traces allow), and the allocations by op: each event's positive
Bytes to the innermost host op (`cpu_op`, torch 1.x's `Operator`) enclosing its timestamp on the
same thread (start <= ts <= end; the latest start, then the shorter, then the later in the file).

Ascend. memory_record.csv (db: MEMORY_RECORD) holds one row per allocator state change per
component: PTA (torch_npu's caching allocator), GE (the graph engine), PTA+GE (torch_npu's sum of
the latest PTA and the latest GE record at each of them), APP (the process's device memory,
reserved only); per (device, component) the peaks of Total Allocated / Total Reserved. torch_npu
writes bytes / 1024**2 as MB and bytes / 1024 as KB (its Constant.B_TO_MB / B_TO_KB, msprof-analyze's
MEMORY_B_TO_KB); the db keeps the bytes. operator_memory.csv (db: OP_MEMORY) holds one row per
allocation with the op torch_npu attributed it to; per (device, op) the bytes and the count.

Unusable records are skipped and counted (`n_bad`); an unreadable file is a warning, never an
exception. The pure functions take rows or event dicts; the readers (`read_*`) do the I/O.
"""
from __future__ import annotations

import csv
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

import numpy as np

from mindspeed_profiler.core.fileio import connect_readonly

from ..parsing.numbers import bad_cells, exact_int, note_bad
from mindspeed_profiler.analysis.models.rows import Field, RowModel, each_capture, inside
from . import intervals
from .classify import ANNOTATION_CATS, HOST_OP_CATS
from .grouping import distinct, run_starts
from .maxtree import MaxTree

TOP_N = 10
MB = 1024 * 1024          # torch_npu's B_TO_MB: memory_record.csv's and operator_memory.csv's (MB)
KB = 1024                 # torch_npu's B_TO_KB: operator_memory.csv's Size(KB)
from ..parsing.memory_events import INT64, MEMORY_EVENT, as_int, as_real, memory_record  # noqa: E402,F401
KINETO_SOURCE = "kineto [memory]"
GPU_TYPES = ("CUDA", "HIP")
PROFILER_STEP = "ProfilerStep#"
MAX_RANGES = 50                 # range names kept per device, by peak   # the c10 device types Kineto's deviceProperties describe
MEMORY_RECORD_CSV = "memory_record.csv"
OPERATOR_MEMORY_CSV = "operator_memory.csv"
ASCEND_OUTPUT = "ASCEND_PROFILER_OUTPUT"
# c10::DeviceType (torch.autograd.DeviceType)
DEVICE_TYPES = {0: "CPU", 1: "CUDA", 2: "MKLDNN", 3: "OPENGL", 4: "OPENCL", 5: "IDEEP", 6: "HIP", 7: "FPGA",
                8: "MAIA", 9: "XLA", 10: "Vulkan", 11: "Metal", 12: "XPU", 13: "MPS", 14: "Meta", 15: "HPU",
                16: "VE", 17: "Lazy", 18: "IPU", 19: "MTIA", 20: "PrivateUse1"}


# the raw [memory] events become records in the parse (parsing/memory_events.py)
_int, _real = as_int, as_real


def device_label(device_type: int, device_id: int) -> str:
    """"CUDA:0", "CPU" (id -1), "PrivateUse1:3", "type7:0" for an unknown type."""
    name = DEVICE_TYPES.get(device_type, f"type{device_type}")
    return name if device_id < 0 else f"{name}:{device_id}"


# ------------------------------------------------------------------------------------- Kineto


def _memory_event(e) -> tuple | None:
    """The record (parsing/memory_events.py) of a [memory] event dict, None when unusable."""
    return memory_record(e.get("ts"), e.get("pid"), e.get("tid"), e.get("args"))


def is_memory_event(e) -> bool:
    return type(e) is dict and e.get("name") == MEMORY_EVENT and e.get("ph") in ("i", "I")


def is_host_op(e) -> bool:
    return type(e) is dict and e.get("ph") == "X" and e.get("cat") in HOST_OP_CATS


def _op_of(e) -> tuple | None:
    """(ts, dur, pid, tid, name) of a host op or range dict with a usable time, else None."""
    ts, dur = _real(e.get("ts")), _real(e.get("dur"))
    if ts is None or dur is None or dur < 0:
        return None
    return ts, dur, str(e.get("pid")), str(e.get("tid")), e.get("name")


@dataclass(frozen=True)
class Spans:
    """Host ops or annotation ranges, in file order: the raw ts (us), dur, and codes of the thread
    (into `threads`: distinct (pid, tid) texts) and of the name (into `names`: distinct texts)."""
    ts: np.ndarray
    dur: np.ndarray
    thread: np.ndarray
    threads: list
    name: np.ndarray
    names: list


def _recode(codes: np.ndarray, label_of) -> tuple[np.ndarray, list]:
    """Codes of values -> codes of their distinct labels (label_of(code)), and those labels: two
    values with one label (a pid 1 and a pid "1") are one."""
    used = distinct(codes)
    labels: dict = {}
    remap = np.array([labels.setdefault(label_of(c), len(labels)) for c in used.tolist()], dtype=np.int64)
    return (remap[np.searchsorted(used, codes)] if len(codes) else np.zeros(0, dtype=np.int64)), list(labels)


def spans_of(rows: list[tuple]) -> Spans:
    """Spans of (ts, dur, pid, tid, name) tuples (_op_of's)."""
    ts, dur, pid, tid, name = zip(*rows) if rows else ((),) * 5
    threads: dict = {}
    names: dict = {}
    return Spans(np.array(ts, dtype=np.float64), np.array(dur, dtype=np.float64),
                 np.array([threads.setdefault(k, len(threads)) for k in zip(pid, tid)], dtype=np.int64), list(threads),
                 np.array([names.setdefault(str(n), len(names)) for n in name], dtype=np.int64), list(names))


def table_spans(ev, raw_ts: np.ndarray, mask: np.ndarray) -> Spans:
    """Spans of the Events table's rows in `mask` (raw_ts: their raw times, kineto_trace.TraceMemory)."""
    i = np.flatnonzero(mask)
    n_tids = max(len(ev.tids), 1)
    pids, tids = [str(p) for p in ev.pids], [str(t) for t in ev.tids]
    thread, threads = _recode(ev.pid[i].astype(np.int64) * n_tids + ev.tid[i], lambda c: (pids[c // n_tids], tids[c % n_tids]))
    name, names = _recode(ev.name[i].astype(np.int64), lambda c: str(ev.names[c]))
    return Spans(raw_ts[i], ev.dur[i], thread, threads, name, names)


def is_range(e) -> bool:
    """A host annotation range whose memory peak is asked for: a record_function / mstx range
    (our profiler's stage ranges are these), not torch's ProfilerStep#N."""
    return (type(e) is dict and e.get("ph") == "X" and e.get("cat") in ANNOTATION_CATS
            and not str(e.get("name", "")).startswith(PROFILER_STEP))


def range_peaks(device: str, ts: np.ndarray, alloc: np.ndarray, resv: np.ndarray, ranges: Spans,
                top_n: int = MAX_RANGES) -> list[dict]:
    """MEMORY_STAGE_PEAKS rows of one device: per range name, the largest Total Allocated / Reserved
    of the device's records inside any range of that name (start <= ts <= end, every thread: the
    allocator is the process's), and how many ranges held a record. The top_n by peak allocated.
    ts: the device's records' times, sorted; alloc, resv: their totals, -1 for none."""
    lo = np.searchsorted(ts, ranges.ts, "left")
    with np.errstate(over="ignore"):   # an end past float's range is inf, as Python's sum is
        hi = np.searchsorted(ts, ranges.ts + ranges.dur, "right")
    held = hi > lo
    name = ranges.name[held]
    n_ranges = np.bincount(name, minlength=len(ranges.names))
    peaks = []
    for totals in (alloc, resv):
        peak = np.full(len(ranges.names), -1, dtype=np.int64)
        np.maximum.at(peak, name, MaxTree(totals).range_max(lo[held], hi[held], -1))
        peaks.append(peak.tolist())
    rows = [MEMORY_STAGE_PEAKS.row(device=device, range=ranges.names[k], n_ranges=int(n_ranges[k]),
                                   peak_allocated_bytes=peaks[0][k] if peaks[0][k] >= 0 else None,
                                   peak_reserved_bytes=peaks[1][k] if peaks[1][k] >= 0 else None, source=KINETO_SOURCE)
            for k in np.flatnonzero(n_ranges).tolist()]
    rows.sort(key=lambda r: (-(r["peak_allocated_bytes"] or -1), r["range"]))
    return rows[:top_n]


def kineto_memory(events: Iterable, base_ns: int = 0, top_n: int = TOP_N) -> dict:
    """The memory block of one Kineto trace from its raw event dicts (traceEvents; only the
    [memory] events and the host ops are looked at): {"devices": [MEMORY_RECORD_PEAKS rows],
    "ops": [MEMORY_RECORD_OPS rows, top_n per device], "ranges": [MEMORY_STAGE_PEAKS rows],
    "n_bad": unusable [memory] events, "warnings": [...]}. Times are the trace's ts (us) plus
    `base_ns` (baseTimeNanoseconds) / 1000."""
    mem, ops, ranges, n_bad = [], [], [], 0
    for e in events:
        if is_memory_event(e):
            m = _memory_event(e)
            if m is None:
                n_bad += 1
            else:
                mem.append(m)
        elif is_host_op(e):
            if (o := _op_of(e)) is not None:
                ops.append(o)
        elif is_range(e):
            if (o := _op_of(e)) is not None:
                ranges.append(o)
    return memory_block(mem, n_bad, spans_of(ops), spans_of(ranges), base_ns, top_n)


def table_memory(ev, tm, top_n: int = TOP_N) -> dict:
    """kineto_memory of a trace from its one parse: the [memory] records the parser kept and the
    host ops / ranges from the Events table (ev: parsing.events.Events, tm: kineto_trace.TraceMemory
    with raw_ts, the rows' raw times; the same values and file order as the dicts, hence the same
    block)."""
    host = ev.lookup(ev.cats, lambda c: c in HOST_OP_CATS)[ev.cat]
    rng = (ev.lookup(ev.cats, lambda c: c in ANNOTATION_CATS)[ev.cat] & ~host
           & ev.lookup(ev.names, lambda n: not str(n).startswith(PROFILER_STEP))[ev.name])
    return memory_block(tm.records, tm.n_bad, table_spans(ev, tm.raw_ts, host), table_spans(ev, tm.raw_ts, rng),
                        tm.base_ns, top_n)


def memory_block(mem: list[tuple], n_bad: int, ops: Spans, ranges: Spans, base_ns: int = 0,
                 top_n: int = TOP_N) -> dict:
    """kineto_memory's block from the [memory] records (parsing/memory_events.py), the unusable
    count, the host ops and the ranges. Each record's op is the innermost host op enclosing it on
    its thread (intervals.innermost_open); per device the records are taken in time order."""
    base_us = base_ns / 1000.0 if base_ns else 0.0
    warnings = [f"{n_bad} [memory] event(s) unusable, left out"] if n_bad else []
    devices: list[dict] = []
    top: list[dict] = []
    stages: list[dict] = []
    if not mem:
        return {"devices": devices, "ops": top, "ranges": stages, "n_bad": n_bad, "warnings": warnings}
    ts, pid, tid, dt, di, nbytes, alloc, resv = zip(*mem)
    t = np.array(ts, dtype=np.float64)
    thread_of = {k: c for c, k in enumerate(ops.threads)}
    at = intervals.innermost_open(ops.thread, ops.ts, ops.dur,
                                  np.array([thread_of.get(k, -1) for k in zip(pid, tid)], dtype=np.int64), t)
    op = np.full(len(mem), -1, dtype=np.int64)
    op[at >= 0] = ops.name[at[at >= 0]]
    keys = sorted(set(zip(dt, di)))
    code = {k: c for c, k in enumerate(keys)}
    dev = np.array([code[k] for k in zip(dt, di)], dtype=np.int64)
    order = np.lexsort((t, dev))   # by device, then time, then file order
    # the byte counts as int64 where no sum can overflow it, else as Python ints
    exact = np.int64 if sum(map(abs, nbytes)) < INT64 else object
    t, op = t[order], op[order]
    nb = np.array(nbytes, dtype=exact)[order]
    totals = [np.array([-1 if v is None else v for v in col], dtype=np.int64)[order] for col in (alloc, resv)]
    first = run_starts(dev[order]).tolist()   # each device's records (every key has some)
    for (dev_type, dev_id), a, b in zip(keys, first, first[1:] + [len(mem)]):
        label = device_label(dev_type, dev_id)
        row = {"device": label, "device_id": None if dev_id < 0 else dev_id, "component": None, "n_records": b - a}
        for total, (peak, peak_at) in zip(totals, (("peak_allocated_bytes", "peak_at_us"), ("peak_reserved_bytes", "peak_reserved_at_us"))):
            k = int(total[a:b].argmax())   # the first record at the peak
            row[peak], row[peak_at] = (int(total[a + k]), float(t[a + k]) + base_us) if total[a + k] >= 0 else (None, None)
        w, o = nb[a:b], op[a:b]
        pos = w > 0
        row.update(n_allocs=int(pos.sum()), alloc_bytes=int(w[pos].sum()), peak_net_bytes=max(0, int(np.cumsum(w).max())),
                   unattributed_bytes=int(w[pos & (o < 0)].sum()), capacity_bytes=None, source=KINETO_SOURCE)
        devices.append(MEMORY_RECORD_PEAKS.row(**row))
        top += _op_rows(label, o, w, ops.names, top_n)
        stages += range_peaks(label, t[a:b], totals[0][a:b], totals[1][a:b], ranges)
    return {"devices": devices, "ops": top, "ranges": stages, "n_bad": n_bad, "warnings": warnings}


def _op_rows(device: str, op: np.ndarray, nb: np.ndarray, names: list, top_n: int) -> list[dict]:
    """MEMORY_RECORD_OPS rows of one device's records (op: name codes, -1 for none; nb: Bytes): per
    op allocating at all, its allocations, their bytes and largest, and its net bytes; the top_n."""
    has = op >= 0
    if not has.any():
        return []
    by = np.argsort(op[has], kind="stable")
    op, nb = op[has][by], nb[has][by]
    first = run_starts(op)
    pos = nb > 0
    alloc = np.where(pos, nb, 0).astype(nb.dtype)
    groups = zip(op[first].tolist(), np.add.reduceat(alloc, first).tolist(), np.add.reduceat(pos.astype(np.int64), first).tolist(),
                 np.maximum.reduceat(alloc, first).tolist(), np.add.reduceat(nb, first).tolist())
    ranked = sorted((g for g in groups if g[2]), key=lambda g: (-g[1], names[g[0]]))[:top_n]
    return [MEMORY_RECORD_OPS.row(device=device, op=names[k], bytes=b, count=c, max_bytes=m, net_bytes=net, source=KINETO_SOURCE)
            for k, b, c, m, net in ranked]


def read_kineto_memory_events(path: Path) -> tuple[list[dict], int]:
    """I/O: a Kineto trace file's [memory] events and host ops, and its baseTimeNanoseconds (0
    without). Raises OSError / ValueError (jsonscan.TraceFormatError) for a file that is no trace."""
    from ..parsing import jsonscan
    kept: list[dict] = []

    def on_batch(batch: list) -> None:
        kept.extend(e for e in batch if is_memory_event(e) or is_host_op(e) or is_range(e))

    rest = jsonscan.load_trace(Path(path), on_batch)
    base = rest.get("baseTimeNanoseconds") if isinstance(rest, dict) else None
    return kept, base if _int(base) is not None and base > 0 else 0


def with_capacity(devices: list[dict], properties: list[dict]) -> None:
    """Give each GPU row (CUDA:<id>, HIP:<id>) the memory of that device from the trace's
    deviceProperties: what the advisor's memory_near_capacity rule compares its peaks with."""
    total = {p["id"]: p.get("total_memory_bytes") for p in properties}
    for d in devices:
        if str(d.get("device", "")).split(":")[0] in GPU_TYPES and d.get("device_id") in total:
            d["capacity_bytes"] = total[d["device_id"]]


def kineto_trace_memory(path: Path, top_n: int = TOP_N) -> dict:
    """A Kineto trace file's memory block (kineto_memory); an unreadable file: no rows, a warning."""
    try:
        events, base_ns = read_kineto_memory_events(path)
    except (OSError, ValueError) as exc:
        return {"devices": [], "ops": [], "n_bad": 0, "warnings": [f"{Path(path).name}: unreadable ({type(exc).__name__}: {exc})"]}
    return kineto_memory(events, base_ns, top_n)


# ------------------------------------------------------------------------------------- Ascend


def _clean(v) -> str:
    return v.strip() if isinstance(v, str) else ""


def _exact(row: dict, column: str, unit: int) -> int | None:
    """A decimal text cell times `unit`, as an exact int (rounded half-even below one byte / ns),
    in bounded time (parsing/numbers.py); None for an empty cell; ValueError(column, value) for a
    bad one (junk, inf, beyond int64)."""
    v = row.get(column)
    try:
        return exact_int(v if isinstance(v, str) else "", unit)
    except ValueError:
        raise ValueError(column, v) from None


def record_from_csv(row: dict) -> dict | None:
    """A memory_record.csv row as {component, device, ts_ns, allocated_bytes, reserved_bytes}; None
    for an unusable one (no component or device, no time, a negative number, neither total);
    ValueError(column, value) for a bad number."""
    comp, dev = _clean(row.get("Component")), _clean(row.get("Device Type"))
    ts = _exact(row, "Timestamp(us)", 1000)
    alloc, resv = _exact(row, "Total Allocated(MB)", MB), _exact(row, "Total Reserved(MB)", MB)
    if not comp or not dev or ts is None or (alloc is None and resv is None) or min(alloc or 0, resv or 0) < 0:
        return None
    return {"component": comp, "device": dev, "ts_ns": ts, "allocated_bytes": alloc, "reserved_bytes": resv}


def op_from_csv(row: dict) -> dict | None:
    """An operator_memory.csv row as {device, op, bytes}; None for an unusable one; ValueError(column,
    value) for a bad number."""
    name, dev = _clean(row.get("Name")), _clean(row.get("Device Type"))
    size = _exact(row, "Size(KB)", KB)
    if not name or not dev or size is None or size < 0:
        return None
    return {"device": dev, "op": name, "bytes": size}


def _device_id(device: str) -> int | None:
    _, _, n = device.rpartition(":")
    return int(n) if n.isascii() and n.isdigit() else None   # isdigit alone takes "²", int() does not


def _ns_to_us(ns: int) -> float:
    return ns / 1000


def record_peaks(records: Iterable[dict], source: str) -> list[dict]:
    """MEMORY_RECORD_PEAKS rows, one per (device, component), of normalised memory records
    (record_from_csv / the db reader); the time of a peak is its first record, in time order."""
    agg: dict = {}
    for r in sorted(records, key=lambda r: r["ts_ns"]):
        key = (r["device"], r["component"])
        a = agg.get(key)
        if a is None:
            a = agg[key] = MEMORY_RECORD_PEAKS.row(device=r["device"], device_id=_device_id(r["device"]), component=r["component"],
                                                   n_records=0, peak_allocated_bytes=None, peak_at_us=None,
                                                   peak_reserved_bytes=None, peak_reserved_at_us=None, n_allocs=None,
                                                   alloc_bytes=None, peak_net_bytes=None, unattributed_bytes=None, capacity_bytes=None, source=source)
        a["n_records"] += 1
        v = r["allocated_bytes"]
        if v is not None and (a["peak_allocated_bytes"] is None or v > a["peak_allocated_bytes"]):
            a["peak_allocated_bytes"], a["peak_at_us"] = v, _ns_to_us(r["ts_ns"])
        v = r["reserved_bytes"]
        if v is not None and (a["peak_reserved_bytes"] is None or v > a["peak_reserved_bytes"]):
            a["peak_reserved_bytes"], a["peak_reserved_at_us"] = v, _ns_to_us(r["ts_ns"])
    return [agg[k] for k in sorted(agg)]


def op_totals(allocs: Iterable[dict], source: str, top_n: int = TOP_N) -> list[dict]:
    """MEMORY_RECORD_OPS rows: per device, the top_n ops by allocated bytes (then by name)."""
    agg: dict = {}
    for a in allocs:
        o = agg.setdefault((a["device"], a["op"]), [0, 0, 0])
        o[0] += a["bytes"]
        o[1] += 1
        o[2] = max(o[2], a["bytes"])
    out = []
    for dev in sorted({d for d, _ in agg}):
        ranked = sorted(((op, v) for (d, op), v in agg.items() if d == dev), key=lambda kv: (-kv[1][0], kv[0]))[:top_n]
        out += [MEMORY_RECORD_OPS.row(device=dev, op=op, bytes=v[0], count=v[1], max_bytes=v[2], net_bytes=None,
                                      source=source) for op, v in ranked]
    return out


def _parse_rows(rows: Iterable[dict], parse, cells: dict) -> tuple[list[dict], int]:
    """(the parsed rows, the number left out); the bad numbers noted into `cells` (numbers.note_bad)."""
    good, bad = [], 0
    for r in rows:
        try:
            p = parse(r) if isinstance(r, dict) else None
        except ValueError as exc:
            note_bad(cells, *exc.args)
            p = None
        if p is None:
            bad += 1
        else:
            good.append(p)
    return good, bad


def _read_csv(path: Path, required: tuple[str, ...]) -> list[dict]:
    """I/O: a csv's rows (header names stripped); ValueError when a required column is missing."""
    with open(path, newline="", encoding="utf-8-sig") as f:
        reader = csv.DictReader(f)
        header = [_clean(h) for h in reader.fieldnames or ()]
        missing = [c for c in required if c not in header]
        if missing:
            raise ValueError(f"no column {', '.join(missing)}")
        reader.fieldnames = header
        return [r for r in reader]


def read_memory_record_csv(path: Path, cells: dict) -> tuple[list[dict], int]:
    """I/O: memory_record.csv's records (record_from_csv) and the number of unusable rows; its bad
    numbers noted into `cells`."""
    return _parse_rows(_read_csv(path, ("Component", "Timestamp(us)", "Total Reserved(MB)", "Device Type")),
                       record_from_csv, cells)


def read_operator_memory_csv(path: Path, cells: dict) -> tuple[list[dict], int]:
    """I/O: operator_memory.csv's allocations (op_from_csv) and the number of unusable rows; its bad
    numbers noted into `cells`."""
    return _parse_rows(_read_csv(path, ("Name", "Size(KB)", "Device Type")), op_from_csv, cells)


def read_profiler_db_memory(path: Path) -> dict[str, tuple[list[dict], int]]:
    """I/O: a torch_npu db's MEMORY_RECORD records and OP_MEMORY allocations (the shapes of
    record_from_csv / op_from_csv: bytes and ns already, names through STRING_IDS, device
    "NPU:<deviceId>"), each with its number of unusable rows, by table; an absent table is left out.
    Raises sqlite3.Error for a file that is no db."""
    con = connect_readonly(path)
    try:
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        ids = "STRING_IDS" in tables
        out: dict = {}
        if "MEMORY_RECORD" in tables:
            records, bad = [], 0
            for comp, ts, alloc, resv, dev in con.execute(
                    "SELECT s.value, m.timestamp, m.totalAllocated, m.totalReserved, m.deviceId FROM MEMORY_RECORD m "
                    "LEFT JOIN STRING_IDS s ON s.id = m.component" if ids else
                    "SELECT NULL, timestamp, totalAllocated, totalReserved, deviceId FROM MEMORY_RECORD"):
                if (isinstance(comp, str) and comp and _int(ts) is not None and _int(dev) is not None
                        and all(v is None or (_int(v) is not None and v >= 0) for v in (alloc, resv))
                        and (alloc is not None or resv is not None)):
                    records.append({"component": comp, "device": f"NPU:{dev}", "ts_ns": ts, "allocated_bytes": alloc,
                                    "reserved_bytes": resv})
                else:
                    bad += 1
            out["MEMORY_RECORD"] = (records, bad)
        if "OP_MEMORY" in tables:
            allocs, bad = [], 0
            for name, size, dev in con.execute(
                    "SELECT s.value, o.size, o.deviceId FROM OP_MEMORY o LEFT JOIN STRING_IDS s ON s.id = o.name" if ids else
                    "SELECT NULL, size, deviceId FROM OP_MEMORY"):
                if isinstance(name, str) and name and _int(size) is not None and size >= 0 and _int(dev) is not None:
                    allocs.append({"device": f"NPU:{dev}", "op": name, "bytes": size})
                else:
                    bad += 1
            out["OP_MEMORY"] = (allocs, bad)
        return out
    finally:
        con.close()


def _ascend_files(path: Path) -> tuple[Path | None, Path | None, Path | None]:
    """(memory_record.csv, operator_memory.csv, the torch_npu db) of a capture directory, its
    ASCEND_PROFILER_OUTPUT directory, or one of those files."""
    path = Path(path)
    if path.is_file():
        return (path if path.name == MEMORY_RECORD_CSV else None, path if path.name == OPERATOR_MEMORY_CSV else None,
                path if path.suffix == ".db" else None)
    d = path / ASCEND_OUTPUT if (path / ASCEND_OUTPUT).is_dir() else path
    dbs = sorted(p for p in d.glob("ascend_pytorch_profiler*.db") if p.is_file())
    mr, om = d / MEMORY_RECORD_CSV, d / OPERATOR_MEMORY_CSV
    return (mr if mr.is_file() else None, om if om.is_file() else None, dbs[0] if dbs else None)


def ascend_memory(path: Path, top_n: int = TOP_N) -> dict:
    """An Ascend capture's memory block (the shape of kineto_memory's): the text export's
    memory_record.csv / operator_memory.csv, each else the db's MEMORY_RECORD / OP_MEMORY."""
    mr, om, db = _ascend_files(path)
    out: dict = {"devices": [], "ops": [], "n_bad": 0, "warnings": []}
    db_data: dict = {}
    if db is not None and (mr is None or om is None):
        try:
            db_data = read_profiler_db_memory(db)
        except sqlite3.Error as exc:
            out["warnings"].append(f"{db.name}: unreadable ({type(exc).__name__}: {exc})")
    for csv_path, reader, table in ((mr, read_memory_record_csv, "MEMORY_RECORD"), (om, read_operator_memory_csv, "OP_MEMORY")):
        got, source, cells = None, None, {}
        if csv_path is not None:
            try:
                got, source = reader(csv_path, cells), csv_path.name
            except (OSError, ValueError, csv.Error, UnicodeDecodeError) as exc:
                out["warnings"].append(f"{csv_path.name}: unreadable ({type(exc).__name__}: {exc})")
        elif table in db_data:
            got, source = db_data[table], f"{db.name}: {table}"
        if got is None:
            continue
        rows, bad = got
        out["warnings"] += bad_cells(source, cells, what="their rows left out")
        if bad > sum(n for n, _ in cells.values()):
            out["warnings"].append(f"{source}: {bad - sum(n for n, _ in cells.values())} unusable row(s) left out")
        out["n_bad"] += bad
        if table == "MEMORY_RECORD":
            out["devices"] = record_peaks(rows, source)
        else:
            out["ops"] = op_totals(rows, source, top_n)
    return out


# ------------------------------------------------------------------------------------- rows
# captures[*].memory_records (inputs/kineto.py, inputs/ascend_capture.py)


MEMORY_RECORD_PEAKS = RowModel(
    "memory_record_peaks", "device (Ascend: device and component) of a capture's memory records",
    "captures[*].memory_records.devices[*]", table="memory_record_peaks", method="memory_record_peaks",
    select=each_capture(inside("memory_records", "devices")), fields=(
        Field("device", "text", "Kineto: c10 device type and Device Id (CUDA:0, CPU); Ascend: Device Type (NPU:0)"),
        Field("device_id", "id", "the device index (None for CPU)"),
        Field("component", "text", "Ascend: PTA, GE, PTA+GE, APP (torch_npu's components); Kineto: None"),
        Field("n_records", "count", "usable [memory] events / memory_record rows"),
        Field("peak_allocated_bytes", "bytes", "the largest Total Allocated (None where no record has it)"),
        Field("peak_at_us", "us", "absolute time of the first record at peak_allocated_bytes"),
        Field("peak_reserved_bytes", "bytes", "the largest Total Reserved"),
        Field("peak_reserved_at_us", "us", "absolute time of the first record at peak_reserved_bytes"),
        Field("n_allocs", "count", "Kineto: events with Bytes > 0"),
        Field("alloc_bytes", "bytes", "Kineto: the sum of Bytes > 0"),
        Field("peak_net_bytes", "bytes", "Kineto: the peak of the running sum of Bytes from the window's start"),
        Field("unattributed_bytes", "bytes", "Kineto: Bytes > 0 outside every host op of the event's thread"),
        Field("capacity_bytes", "bytes", "Kineto on a GPU: the device's memory (the trace's deviceProperties totalGlobalMem); "
              "else None"),
        Field("source", "text", "kineto [memory], memory_record.csv or '<db>: MEMORY_RECORD'"),
    ))
MEMORY_STAGE_PEAKS = RowModel(
    "memory_stage_peaks", "(device, annotated range name) of a Kineto capture with memory records: the stages",
    "captures[*].memory_records.ranges[*]", table="memory_stage_peaks", method="memory_stage_peaks",
    select=each_capture(inside("memory_records", "ranges")), fields=(
        Field("device", "text", "as memory_record_peaks' device"),
        Field("range", "text", "the range's name: a stage (our profiler draws each stage as one), a record_function or "
              "mstx range; not ProfilerStep#N"),
        Field("n_ranges", "count", "ranges of that name holding a record of the device"),
        Field("peak_allocated_bytes", "bytes", "the largest Total Allocated of a record inside one of them"),
        Field("peak_reserved_bytes", "bytes", "the largest Total Reserved"),
        Field("source", "text", "kineto [memory]"),
    ))
MEMORY_RECORD_OPS = RowModel(
    "memory_record_ops", "op allocating the most on a device of a capture (the top ones)",
    "captures[*].memory_records.ops[*]", table="memory_record_ops", method="memory_record_ops",
    select=each_capture(inside("memory_records", "ops")), fields=(
        Field("device", "text", "as memory_record_peaks' device"),
        Field("op", "text", "Kineto: the innermost host op on the event's thread; Ascend: torch_npu's Name"),
        Field("bytes", "bytes", "allocated: the sum of Bytes > 0 / of Size"),
        Field("count", "count", "allocations"),
        Field("max_bytes", "bytes", "the largest allocation"),
        Field("net_bytes", "bytes", "Kineto: allocated minus freed inside the op itself (torch's self memory usage)"),
        Field("source", "text", "kineto [memory], operator_memory.csv or '<db>: OP_MEMORY'"),
    ))
