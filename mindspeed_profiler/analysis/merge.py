"""Merge per-process segments into one Chrome Trace object that Perfetto opens directly.

Offline code (the runtime tracer writes segments; this reads them): `build_timeline(dir)` is pure
apart from reading the segments; `write_timeline(dir)` writes `timeline.json` (or `.json.gz`)
next to them, atomically. Partial data is fine: a process that
crashed contributes what it flushed, a truncated last line is skipped and reported in
`otherData.warnings`.

Times: each span's monotonic start is mapped to its process's wall clock (header anchor), then to
the reference (driver) clock by the recorded offset. `ts` is in microseconds since
`otherData.time_origin_unix_ns` (relative, so doubles keep sub-microsecond precision).
"""
from __future__ import annotations

import gzip as _gzip
import os
import pathlib
from dataclasses import dataclass, field
from typing import Any, Optional

import orjson

from mindspeed_profiler import formats
from mindspeed_profiler.analysis.parsing import segments as segment

TIMELINE_NAME = formats.TIMELINE_FILE
_TASK_TID_BASE = 5_000_000  # above Linux pid_max (2**22): synthetic lanes never collide with real tids
_OVERLAP_TID_BASE = 9_000_000


@dataclass
class _Proc:
    key: tuple
    role: str
    rank: int
    host: str
    os_pid: int
    sessions: list = field(default_factory=list)  # (Segment path, Session)


def resolve_timeline_dir(path: str) -> str:
    """`path` itself if it holds segments or a timeline, else `path/timeline` if that exists."""
    if os.path.isdir(path) and any(n.endswith(formats.SEGMENT_SUFFIX) for n in os.listdir(path)):
        return path
    sub = os.path.join(path, formats.TIMELINE_DIR)
    if os.path.isdir(sub):
        return sub
    return path


def build_timeline(timeline_dir: str) -> dict:
    """Read every `*.seg.jsonl` under `timeline_dir` and return the merged Chrome Trace object."""
    timeline_dir = resolve_timeline_dir(str(timeline_dir))
    if not os.path.isdir(timeline_dir):
        raise FileNotFoundError(f"timeline directory {timeline_dir!r} does not exist")
    warnings: list[str] = []
    procs: dict[tuple, _Proc] = {}
    paths = list(segment.iter_segment_paths(timeline_dir))
    if not paths:
        raise FileNotFoundError(f"no *{formats.SEGMENT_SUFFIX} segment files in {timeline_dir!r} (was tracer.enable on?)")
    for path in paths:
        try:
            seg = segment.read_segment(path)
        except OSError as exc:
            warnings.append(f"{os.path.basename(path)}: unreadable ({exc}); skipped")
            continue
        warnings += [f"{os.path.basename(path)}:{ln}: {msg}" for ln, msg in seg.problems]
        for sess in seg.sessions:
            h = sess.header
            key = (h.get("host"), h.get("pid"), h.get("role"), h.get("rank"))
            proc = procs.get(key)
            if proc is None:
                proc = procs[key] = _Proc(key, str(h.get("role")), _int(h.get("rank")), str(h.get("host")), _int(h.get("pid")))
            proc.sessions.append((path, sess))
    ordered = sorted(procs.values(), key=lambda p: (p.role != "driver", p.role, p.rank, p.host, p.os_pid))
    names = _process_names(ordered)
    spans: list[tuple[int, int, int, int, list, str, Optional[dict]]] = []  # (start_ns, dur_ns, pid, tid, ev, ...) pre-origin
    meta: list[dict] = []
    info: list[dict] = []
    for idx, proc in enumerate(ordered):
        pid = idx + 1
        meta.append(_m("process_name", pid, 0, {"name": names[idx]}))
        meta.append(_m("process_sort_index", pid, 0, {"sort_index": idx}))
        meta.append(_m("process_labels", pid, 0, {"labels": f"host={proc.host} pid={proc.os_pid}"}))
        threads: dict[int, str] = {}
        stats = _collect(proc, pid, spans, threads)
        for tid, tname in sorted(threads.items()):
            meta.append(_m("thread_name", pid, tid, {"name": tname}))
        info.append({"pid": pid, "name": names[idx], "role": proc.role, "rank": proc.rank, "host": proc.host, "os_pid": proc.os_pid, **stats})
        if stats["dropped"]:
            warnings.append(f"{names[idx]}: the tracer dropped {stats['dropped']} span(s) (buffer full or write failure)")
    origin = min((s[0] for s in spans), default=0)
    events = [_event(s, origin) for s in spans]
    events.sort(key=lambda e: (e["ts"], -e.get("dur", 0)))
    _split_overlaps(events, meta)
    return {
        "traceEvents": meta + events,
        "displayTimeUnit": "ms",
        "otherData": {
            "generator": "mindspeed-profiler merge",
            "schema": formats.SEGMENT_SCHEMA,
            "time_origin_unix_ns": origin,
            "time_base": "ts = microseconds since time_origin_unix_ns, on the reference (driver) clock",
            "processes": info,
            "warnings": warnings,
        },
    }


def _int(v: Any) -> int:
    return v if isinstance(v, int) else -1


def _m(name: str, pid: int, tid: int, args: dict) -> dict:
    return {"ph": "M", "name": name, "pid": pid, "tid": tid, "args": args}


def _process_names(procs: list) -> list[str]:
    base = ["driver" if p.role == "driver" and p.rank == 0 else f"{p.role}:{p.rank}" for p in procs]
    counts = {b: base.count(b) for b in base}
    return [b if counts[b] == 1 else f"{b} (pid {p.os_pid}@{p.host})" for b, p in zip(base, procs)]


def _collect(proc: _Proc, pid: int, out: list, threads: dict) -> dict:
    """Append this process's spans (absolute ns on the reference clock) to `out`; return its stats."""
    n = dropped = 0
    offset = unc = None
    closed = False
    task_tids: dict[tuple, int] = {}
    for _path, sess in proc.sessions:
        h = sess.header
        clock = sess.clock or {}
        off = int(clock.get("offset_ns", h.get("offset_ns", 0)) or 0)
        offset, unc = off, clock.get("uncertainty_ns", unc)
        wall, mono = int(h["clock"]["wall_ns"]), int(h["clock"]["mono_ns"])
        base_args = {"role": proc.role, "rank": proc.rank}
        lane_tid: dict[Any, int] = {}
        for lane, rec in sess.threads.items():
            tid = _int(rec.get("tid"))
            tname = str(rec.get("name") or f"thread-{tid}")
            if rec.get("task"):
                tkey = (tid, rec["task"])
                if tkey not in task_tids:
                    task_tids[tkey] = _TASK_TID_BASE + len(task_tids) + 1
                tid, tname = task_tids[tkey], f"{tname} / {rec['task']}"
            lane_tid[lane] = tid
            threads.setdefault(tid, tname)
        for ev in sess.events:
            ph, name, cat, start, dur, lane = ev[:6]
            args = ev[6] if len(ev) > 6 and isinstance(ev[6], dict) else None
            tid = lane_tid.get(lane)
            if tid is None:
                tid = lane if isinstance(lane, int) else 0
                threads.setdefault(tid, f"lane-{tid}")
            full = dict(base_args)
            if args:
                full.update(args)
            out.append((wall + (start - mono) + off, max(0, dur), pid, tid, ph, str(name), str(cat), full))
            n += 1
        if sess.stats:
            dropped += int(sess.stats.get("dropped", 0) or 0)
        closed = sess.closed
    return {"events": n, "dropped": dropped, "offset_ns": offset or 0, "uncertainty_ns": unc, "synced": unc is not None, "closed": closed}


def _event(s: tuple, origin: int) -> dict:
    start, dur, pid, tid, ph, name, cat, args = s
    ev = {"ph": ph, "name": name, "cat": cat, "ts": (start - origin) / 1000.0, "pid": pid, "tid": tid, "args": args}
    if ph == "X":
        ev["dur"] = dur / 1000.0
    else:
        ev["s"] = "t"
    return ev


def _split_overlaps(events: list, meta: list) -> None:
    """Move spans that cross (not nest in) an earlier span of the same lane to an extra lane.

    Context-manager spans always nest; crossing ones come from trace_begin/trace_end pairs that
    are not LIFO. Perfetto would drop them, so they get their own "(overlap)" track instead.
    Expects `events` sorted by (ts, -dur).
    """
    stacks: dict[tuple, list] = {}
    extra: dict[tuple, int] = {}
    for ev in events:
        if ev["ph"] != "X":
            continue
        key = (ev["pid"], ev["tid"])
        stack = stacks.setdefault(key, [])
        end = ev["ts"] + ev["dur"]
        while stack and stack[-1] <= ev["ts"]:
            stack.pop()
        if stack and end > stack[-1] + 1e-6:
            if key not in extra:
                extra[key] = _OVERLAP_TID_BASE + len(extra) + 1
                meta.append(_m("thread_name", ev["pid"], extra[key], {"name": f"tid {ev['tid']} (overlap)"}))
            ev["tid"] = extra[key]
            continue
        stack.append(end)


def write_timeline(timeline_dir: str, gzip: bool = False) -> pathlib.Path:
    """Merge the segments and write `<timeline_dir>/timeline.json[.gz]` (atomically). Returns the path."""
    timeline_dir = resolve_timeline_dir(str(timeline_dir))
    trace = build_timeline(timeline_dir)
    data = orjson.dumps(trace)
    out = pathlib.Path(timeline_dir) / (TIMELINE_NAME + (".gz" if gzip else ""))
    tmp = out.with_name(out.name + f".tmp{os.getpid()}")
    if gzip:
        with _gzip.open(tmp, "wb", compresslevel=6) as fh:
            fh.write(data)
    else:
        tmp.write_bytes(data)
    os.replace(tmp, out)
    stale = out.with_name(TIMELINE_NAME if gzip else TIMELINE_NAME + ".gz")
    if stale.exists():  # never leave an older merge next to the new one (readers take either)
        stale.unlink()
    return out


def read_timeline_file(path: str) -> dict:
    """Read a merged timeline (`.json` or `.json.gz`)."""
    opener = _gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rb") as fh:
        return orjson.loads(fh.read())


def configured_gzip(timeline_dir: str) -> bool | None:
    """`tracer.gzip` of the run that wrote `timeline_dir`, from its run.json (in the directory or
    its parent, the profile_save_path); None when there is no readable run.json."""
    for d in (pathlib.Path(timeline_dir), pathlib.Path(timeline_dir).parent):
        try:
            run = orjson.loads((d / formats.RUN_FILE).read_bytes())
            value = run["config"]["profiler_config"]["tracer"]["gzip"]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if isinstance(value, bool):
            return value
    return None
