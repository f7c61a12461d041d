"""Reading the tracer's segment files (format: formats.py, docs/tracing.md): offline code, no
runtime import. Bad or truncated lines become problems; everything else is kept."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Iterator, Optional

import orjson

from mindspeed_profiler.core import formats
from mindspeed_profiler.core.fileio import open_regular


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
    with open_regular(path) as fh:   # never a FIFO: it would block
        data = fh.read()
    for lineno, line in enumerate(data.split(b"\n"), 1):
        if not line.strip():
            continue
        try:
            rec = orjson.loads(line)
        except orjson.JSONDecodeError:
            seg.problems.append((lineno, "not valid JSON (truncated by a crash?): skipped"))
            continue
        if len(line) > LONG_LINE:
            rec = within_nesting(seg, rec, lineno)
            if rec is None:
                continue
        apply_record(seg, rec, lineno)
    return finish_segment(seg)


# Containers in containers a segment line may hold: the merge writes an event's args back into the
# timeline (3 levels down) with orjson, which encodes at most 254 levels; the tracer's own lines
# never come near (tracing/segment.py cuts its values at 32). A line shorter than LONG_LINE bytes
# cannot nest that deep (each level takes two brackets): only longer lines are looked at.
MAX_NESTING = 200
LONG_LINE = 2 * MAX_NESTING


def within_nesting(seg: Segment, rec: Any, lineno: int) -> Any:
    """`rec` when it nests at most MAX_NESTING levels; else an event with its args replaced by a
    note, or None (the line is skipped), the problem said in `seg`. Both
    readers (read_segment, the merge's scan) call it on every line longer than LONG_LINE."""
    if not _nested_over(rec, MAX_NESTING):
        return rec
    if isinstance(rec, list) and len(rec) > 6 and not _nested_over(rec[:6], MAX_NESTING):
        seg.problems.append((lineno, f"event args nested more than {MAX_NESTING} levels deep (the merge writes "
                                     "no more): args replaced by a note"))
        return [*rec[:6], {"dropped": f"args nested more than {MAX_NESTING} levels deep"}, *rec[7:]]
    seg.problems.append((lineno, f"a line nested more than {MAX_NESTING} levels deep: skipped"))
    return None


def _nested_over(v: Any, limit: int) -> bool:
    """Whether `v` holds containers more than `limit` levels deep (no recursion: depth is the point)."""
    stack = [(v, 1)] if isinstance(v, (dict, list)) else []
    while stack:
        x, depth = stack.pop()
        if depth > limit:
            return True
        stack.extend((c, depth + 1) for c in (x.values() if isinstance(x, dict) else x) if isinstance(c, (dict, list)))
    return False


def finish_segment(seg: Segment) -> Segment:
    """Drop the skipped sessions; a file with neither a session nor a problem is no segment."""
    seg.sessions = [x for x in seg.sessions if x is not None]
    if not seg.sessions and not seg.problems:
        seg.problems.append((0, "no header: not a segment file or empty"))
    return seg


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _valid_header(rec: dict) -> str | None:
    """Why a header cannot start a session (None: it can). Every field merge does arithmetic
    or grouping with must have its type: one bad segment never fails the others."""
    clock = rec.get("clock")
    if not isinstance(clock, dict) or not _is_int(clock.get("wall_ns")) or not _is_int(clock.get("mono_ns")):
        return "header without a usable clock (wall_ns, mono_ns integers)"
    if not _is_int(rec.get("offset_ns", 0)) or not _is_int(rec.get("pid", 0)) or not _is_int(rec.get("rank", 0)):
        return "header with a non-integer offset_ns / pid / rank"
    if not isinstance(rec.get("role", ""), str) or not isinstance(rec.get("host", ""), str):
        return "header with a non-text role / host"
    return None


def apply_record(seg: Segment, rec: Any, lineno: int) -> None:
    """Add one parsed line to `seg`: a header starts a session (None when it is unusable: its lines
    are skipped), an event or record joins the current one, anything malformed becomes a problem.
    The one validation of segment lines (read_segment and the streaming merge's scan use it)."""
    if isinstance(rec, list):
        if not seg.sessions:
            seg.problems.append((lineno, "event before any header: skipped"))
        elif seg.sessions[-1] is None:
            return   # the lines of a skipped session
        elif len(rec) < 6 or not _is_int(rec[3]) or not _is_int(rec[4]) or not _is_int(rec[5]) \
                or not isinstance(rec[0], str):
            seg.problems.append((lineno, f"malformed event {rec!r:.80}: skipped"))
        else:
            seg.sessions[-1].events.append(rec)
        return
    kind = rec.get("type") if isinstance(rec, dict) else None
    if kind == formats.SEG_HEADER:
        why = _valid_header(rec)
        if why:
            seg.problems.append((lineno, f"{why}: this session skipped"))
            seg.sessions.append(None)   # its lines are skipped up to the next header
            return
        seg.sessions.append(Session(header=rec))
        return
    if not seg.sessions:
        seg.problems.append((lineno, f"{kind!r} record before any header: skipped"))
        return
    cur = seg.sessions[-1]
    if cur is None:
        return
    if kind == formats.SEG_THREAD:
        if _is_int(rec.get("lane")):
            cur.threads[rec["lane"]] = rec
        else:
            seg.problems.append((lineno, "thread record without an integer lane: skipped"))
    elif kind == formats.SEG_CLOCK:
        if _is_int(rec.get("offset_ns")) and (rec.get("uncertainty_ns") is None or _is_int(rec.get("uncertainty_ns"))):
            cur.clock = rec
        else:
            seg.problems.append((lineno, "clock record without integer offset_ns / uncertainty_ns: skipped"))
    elif kind == formats.SEG_STATS:
        cur.stats = {k: v for k, v in rec.items() if _is_int(v) or k == "type"}
    elif kind == formats.SEG_CLOSE:
        cur.closed = True
    else:
        seg.problems.append((lineno, f"unknown record type {kind!r}: skipped"))


def iter_segment_paths(timeline_dir: str) -> Iterator[str]:
    """The segment files of a directory (regular files only: a FIFO would block the reader)."""
    for name in sorted(os.listdir(timeline_dir)):
        path = os.path.join(timeline_dir, name)
        if name.endswith(formats.SEGMENT_SUFFIX) and os.path.isfile(path):
            yield path
