"""Reading the tracer's segment files (format: formats.py, docs/tracing.md): offline code, no
runtime import. Bad or truncated lines become problems; everything else is kept."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Iterator, Optional

import orjson

from mindspeed_profiler import formats


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
    if kind == formats.SEG_HEADER:
        if not isinstance(rec.get("clock"), dict):
            seg.problems.append((lineno, "header without clock: skipped"))
            return
        seg.sessions.append(Session(header=rec))
        return
    if not seg.sessions:
        seg.problems.append((lineno, f"{kind!r} record before any header: skipped"))
        return
    cur = seg.sessions[-1]
    if kind == formats.SEG_THREAD:
        cur.threads[rec.get("lane")] = rec
    elif kind == formats.SEG_CLOCK:
        cur.clock = rec
    elif kind == formats.SEG_STATS:
        cur.stats = rec
    elif kind == formats.SEG_CLOSE:
        cur.closed = True
    else:
        seg.problems.append((lineno, f"unknown record type {kind!r}: skipped"))


def iter_segment_paths(timeline_dir: str) -> Iterator[str]:
    for name in sorted(os.listdir(timeline_dir)):
        if name.endswith(formats.SEGMENT_SUFFIX):
            yield os.path.join(timeline_dir, name)
