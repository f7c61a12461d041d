"""The segment file format: one JSON-lines file per process, written by the recorder, read by merge.

    {"type": "header", "schema": 1, "host", "pid", "role", "rank", "clock": {"wall_ns", "mono_ns"}, ...}
    {"type": "thread", "lane": 1, "tid": 4242, "name": "MainThread", "task": null}
    ["X", name, cat, start_mono_ns, dur_ns, lane, args | null]       # a complete span
    ["i", name, cat, mono_ns, 0, lane, args | null]                  # an instant (mark)
    {"type": "clock", "offset_ns", "uncertainty_ns", "rtt_ns", "reference"}
    {"type": "stats", "recorded", "dropped", "failed_writes"}
    {"type": "close"}

Records are appended in batches; a crash can leave at most one truncated last line, which the
reader skips. A header may appear again (the tracer was re-initialised in the same process): the
lines after it belong to that new session.
"""
from __future__ import annotations

import io
import os
import re
import socket
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Optional

import orjson

SCHEMA = 1
SUFFIX = ".seg.jsonl"
_SAFE = re.compile(r"[^A-Za-z0-9_.\-]+")


def segment_name(role: str, rank: int, host: str, pid: int) -> str:
    """Unique per process and host, readable: `<role>_rank<R>_<host>_<pid>.seg.jsonl`."""
    return f"{_SAFE.sub('-', role)}_rank{rank}_{_SAFE.sub('-', host)}_{pid}{SUFFIX}"


def make_header(role: str, rank: int, wall_ns: int, mono_ns: int, extra: Optional[dict] = None) -> dict:
    header = {
        "type": "header",
        "schema": SCHEMA,
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "role": role,
        "rank": rank,
        "clock": {"wall_ns": wall_ns, "mono_ns": mono_ns},
        "offset_ns": 0,
    }
    if extra:
        header.update(extra)
    return header


def _default(obj: Any) -> Any:
    return repr(obj)  # user args may hold anything: never fail a flush over one value


def dumps_line(obj: Any) -> bytes:
    return orjson.dumps(obj, default=_default, option=orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_APPEND_NEWLINE)


def encode_records(records: Iterable[Any]) -> bytes:
    # Write each line into one buffer and drop it at once: keeping many small orjson outputs alive
    # (b"".join of a list) is ~20x slower than encoding them.
    out = io.BytesIO()
    write = out.write
    for r in records:
        write(dumps_line(r))
    return out.getvalue()


@dataclass
class Session:
    """What one header (and the lines after it) says about one process's recording session."""

    header: dict
    threads: dict = field(default_factory=dict)  # lane -> thread record
    events: list = field(default_factory=list)  # raw event lists
    clock: Optional[dict] = None  # the last clock record
    stats: Optional[dict] = None
    closed: bool = False


@dataclass
class Segment:
    path: str
    sessions: list = field(default_factory=list)
    problems: list = field(default_factory=list)  # (line number, message)


def read_segment(path: str) -> Segment:
    """Parse one segment file; bad or truncated lines become `problems`, the rest is kept."""
    seg = Segment(path=path)
    with open(path, "rb") as fh:
        data = fh.read()
    for lineno, line in enumerate(data.split(b"\n"), 1):
        if not line.strip():
            continue
        try:
            rec = orjson.loads(line)
        except orjson.JSONDecodeError:
            seg.problems.append((lineno, "not valid JSON (truncated by a crash?): skipped"))
            continue
        _apply(seg, rec, lineno)
    if not seg.sessions and not seg.problems:
        seg.problems.append((0, "no header: not a segment file or empty"))
    return seg


def _apply(seg: Segment, rec: Any, lineno: int) -> None:
    if isinstance(rec, list):
        if not seg.sessions:
            seg.problems.append((lineno, "event before any header: skipped"))
        elif len(rec) < 6 or not isinstance(rec[3], int) or not isinstance(rec[4], int):
            seg.problems.append((lineno, f"malformed event {rec!r:.80}: skipped"))
        else:
            seg.sessions[-1].events.append(rec)
        return
    kind = rec.get("type") if isinstance(rec, dict) else None
    if kind == "header":
        if not isinstance(rec.get("clock"), dict):
            seg.problems.append((lineno, "header without clock: skipped"))
            return
        seg.sessions.append(Session(header=rec))
        return
    if not seg.sessions:
        seg.problems.append((lineno, f"{kind!r} record before any header: skipped"))
        return
    cur = seg.sessions[-1]
    if kind == "thread":
        cur.threads[rec.get("lane")] = rec
    elif kind == "clock":
        cur.clock = rec
    elif kind == "stats":
        cur.stats = rec
    elif kind == "close":
        cur.closed = True
    else:
        seg.problems.append((lineno, f"unknown record type {kind!r}: skipped"))


def iter_segment_paths(timeline_dir: str) -> Iterator[str]:
    for name in sorted(os.listdir(timeline_dir)):
        if name.endswith(SUFFIX):
            yield os.path.join(timeline_dir, name)
