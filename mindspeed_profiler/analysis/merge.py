"""Merge per-process segments into one Chrome Trace object that Perfetto opens directly.

Offline code (the runtime tracer writes segments; this reads them): `build_timeline(dir)` is pure
apart from reading the segments; `write_timeline(dir)` writes `timeline.json` (or `.json.gz`)
next to them, atomically. Partial data is fine: a process that
crashed contributes what it flushed, a truncated last line is skipped and reported in
`otherData.warnings`.

Runs: every segment session carries its run's id (header `run_id`). A directory written by two
runs holds sessions of both (even in one file, when a pid comes back): `build_timeline(dir,
run_id)` merges one run's sessions only, never mixing them; `write_timeline` writes one file per
run when there are several (`timeline.<run_id>.json`) and `timeline.json` for the latest.

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

from mindspeed_profiler.fileio import atomic_path, write_atomic

from mindspeed_profiler import formats
from mindspeed_profiler.analysis.parsing import segments as segment
from mindspeed_profiler.analysis.system_tracks import add_system_tracks, system_dir_of
from mindspeed_profiler.analysis.parsing.rlinf_trace import RLINF_TRACE_FILE, combine, read_rlinf_events, to_timeline

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
    """`path` itself if it holds segments (or RLinf's trace_events.jsonl), else `path/timeline` if
    that exists."""
    if os.path.isdir(path) and any(n.endswith(formats.SEGMENT_SUFFIX) or n == RLINF_TRACE_FILE for n in os.listdir(path)):
        return path
    sub = os.path.join(path, formats.TIMELINE_DIR)
    if os.path.isdir(sub):
        return sub
    return path


ANY_RUN = object()  # build_timeline(run_id=ANY_RUN): every session, whatever its run


@dataclass
class SegmentSet:
    """Every readable segment session of a timeline directory, and the problems met reading them."""

    sessions: list = field(default_factory=list)  # (path, Session)
    warnings: list = field(default_factory=list)

    def runs(self) -> list[str | None]:
        """The run ids of the sessions, the latest run last (by its first session's start)."""
        first: dict = {}
        for _path, sess in self.sessions:
            rid = _run_of(sess)
            start = int(sess.header["clock"].get("wall_ns") or 0) if isinstance(sess.header.get("clock"), dict) else 0
            first[rid] = min(first.get(rid, start), start)
        return sorted(first, key=lambda r: (first[r], str(r)))


def _run_of(sess: Any) -> str | None:
    rid = sess.header.get(formats.RUN_ID_KEY)
    return rid if isinstance(rid, str) else None


def read_segments(timeline_dir: str) -> SegmentSet:
    timeline_dir = resolve_timeline_dir(str(timeline_dir))
    if not os.path.isdir(timeline_dir):
        raise FileNotFoundError(f"timeline directory {timeline_dir!r} does not exist")
    paths = list(segment.iter_segment_paths(timeline_dir))
    if not paths:
        raise FileNotFoundError(f"no *{formats.SEGMENT_SUFFIX} segment files in {timeline_dir!r} (was tracer.enable on?)")
    out = SegmentSet()
    for path in paths:
        try:
            seg = segment.read_segment(path)
        except OSError as exc:
            out.warnings.append(f"{os.path.basename(path)}: unreadable ({exc}); skipped")
            continue
        out.warnings += [f"{os.path.basename(path)}:{ln}: {msg}" for ln, msg in seg.problems]
        out.sessions += [(path, sess) for sess in seg.sessions]
    return out


def build_timeline(timeline_dir: str, run_id: Any = None, segments: SegmentSet | None = None) -> dict:
    """The merged Chrome Trace object of one run's segments under `timeline_dir`: `run_id`, or the
    latest run when None (`ANY_RUN`: every session, runs mixed)."""
    segs = segments if segments is not None else read_segments(timeline_dir)
    runs = segs.runs()
    if run_id is None:
        run_id = runs[-1] if runs else None
    elif run_id is not ANY_RUN and run_id not in runs:
        raise ValueError(f"no segments of run {run_id!r} in {timeline_dir} (runs there: {', '.join(map(str, runs))})")
    warnings = list(segs.warnings)
    if len(runs) > 1 and run_id is not ANY_RUN:
        warnings.append(f"the directory holds segments of {len(runs)} runs ({', '.join(map(str, runs))}): "
                        f"this timeline is run {run_id}'s only")
    procs: dict[tuple, _Proc] = {}
    for path, sess in segs.sessions:
        if run_id is not ANY_RUN and _run_of(sess) != run_id:
            continue
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
            formats.RUN_ID_KEY: None if run_id is ANY_RUN else run_id,
            "runs": runs,
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
    """Merge the segments and write `<timeline_dir>/timeline.json[.gz]` (atomically): the latest
    run's; when the directory holds several runs, also `timeline.<run_id>.json[.gz]` for each.
    Returns the path of timeline.json[.gz]."""
    timeline_dir = resolve_timeline_dir(str(timeline_dir))
    rlinf = _rlinf_timeline(pathlib.Path(timeline_dir))
    if rlinf is not None and not any(n.endswith(formats.SEGMENT_SUFFIX) for n in os.listdir(timeline_dir)):
        return _write_trace(pathlib.Path(timeline_dir), TIMELINE_NAME, rlinf, gzip)   # RLinf's alone, Perfetto-ready
    segs = read_segments(timeline_dir)
    runs = segs.runs()
    latest = build_timeline(timeline_dir, None, segs)
    out = _write_trace(pathlib.Path(timeline_dir), TIMELINE_NAME, combine(latest, rlinf) if rlinf else latest, gzip)
    if len(runs) > 1:
        for rid in runs:
            _write_trace(pathlib.Path(timeline_dir), formats.run_timeline_file(str(rid)), build_timeline(timeline_dir, rid, segs), gzip)
    return out


def _rlinf_timeline(directory: pathlib.Path) -> dict | None:
    """RLinf's trace_events.jsonl of this directory as our timeline format, or None."""
    path = directory / RLINF_TRACE_FILE
    if not path.is_file():
        return None
    events, warnings = read_rlinf_events(path)
    trace, more = to_timeline(events)
    trace["otherData"]["warnings"] = warnings + more
    return trace


def _write_trace(directory: pathlib.Path, name: str, trace: dict, gzip: bool) -> pathlib.Path:
    add_system_tracks(trace, system_dir_of(directory))  # py-spy frames of this run's wrapped workers (system_tracks.py)
    data = orjson.dumps(trace)
    out = directory / (name + (".gz" if gzip else ""))
    if gzip:
        with atomic_path(out) as tmp, _gzip.open(tmp, "wb", compresslevel=6) as fh:
            fh.write(data)
    else:
        write_atomic(out, data)
    stale = out.with_name(name if gzip else name + ".gz")
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
