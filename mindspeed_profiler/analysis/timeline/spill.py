"""Segments read once, their events sorted and spilled to a temporary file: what lets the merge
stream any number of segments in bounded memory.

`scan_segments(dir)` reads every segment file line by line (validation: parsing/segments.py's own
rules; event lines are checked inline, the other records go through its `apply_record`), keeps each
session's header, threads, clock, stats and a few numbers, and writes its events, sorted by
(start, longest first) in runs of at most `chunk` events, to one unlinked temporary file.
`SessionEvents.runs` reads them back lazily (`os.pread`: one descriptor for every run, however many
segments). No event stays in memory after its run is written.

The events travel as records already shaped for the writers, so the merge pass does no parsing and
no per-event dict building (the merge's cost is per event: every step here is paid 20 M times):
  (start, negdur, lane, tag, args)
  start   the session's monotonic ns (the merge adds its clock shift: the order is the same)
  negdur  -duration (ns, clipped at 0) of a span, 0 for an instant: (start, negdur) sorts a
          parent before its children
  tag     (JSON head `,{"ph":..,"name":..,"cat":..,"ts":`, is a span, name, cat): one shared tuple
          per (ph, name, cat), so the spill (marshal writes it once per block) and the writers'
          caches see it once
  args    the event's args as JSON text without their braces' opening: `,"k":v,...}` (to follow
          the `{"role":..,"rank":..` that every event gets), `}` for none, or the whole object
          `{...}` when the args themselves say role or rank (they win, in role / rank's place)
Blocks of BLOCK_EVENTS records are marshal'ed (the fastest standard-library codec for tuples of
ints, str and bytes; the file never outlives the merge, so its format is private to it).

The same interface wraps a session read fully into memory (`in_memory`), so `build_timeline` on a
`read_segments()` result and the streaming writer share one merge.
"""
from __future__ import annotations

import marshal
import operator
import os
import tempfile
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import orjson

from mindspeed_profiler.analysis.parsing import segments as segment
from mindspeed_profiler.analysis.parsing.numbers import int_or
from mindspeed_profiler.analysis.parsing.segments import LONG_LINE, within_nesting
from mindspeed_profiler.core.fileio import open_regular

CHUNK_EVENTS = 50_000      # events sorted in memory at once (~15 MB); a longer session spills several runs
BLOCK_EVENTS = 256         # records per marshal block: the merge holds one block per run (1,000 runs: ~70 MB)
NO_ARGS = b"}"
_TAGS_MAX = 100_000        # distinct (ph, name, cat) shared; beyond, the table starts afresh (sharing only)

_dumps, _loads, _JSONDecodeError = orjson.dumps, orjson.loads, orjson.JSONDecodeError


def sort_key(ev: list) -> tuple:
    """The merged timeline's order within one session: start, then the longer span first (a parent
    before its children); instants count as 0 long, as in the Chrome trace."""
    return ev[3], -(max(0, ev[4]) if ev[0] == "X" else 0)


_order = operator.itemgetter(0, 1)   # a record's (start, negdur)


class RecordMaker:
    """Turns a session's raw event lists into merge records (see the module docstring)."""

    def __init__(self, header: dict, tags: dict | None = None):
        self.tags = {} if tags is None else tags
        # the base args of every event: the process's role and rank, as plan_timeline derives them
        self.base = {"role": str(header.get("role")), "rank": int_or(header.get("rank"))}

    def tag(self, ph: str, name: Any, cat: Any) -> tuple:
        name = name if type(name) is str else str(name)
        cat = cat if type(cat) is str else str(cat)
        key = (ph, name, cat)
        tag = self.tags.get(key)
        if tag is None:
            if len(self.tags) >= _TAGS_MAX:
                self.tags.clear()
            tag = self.tags[key] = (b',{"ph":' + _dumps(ph) + b',"name":' + _dumps(name) + b',"cat":' + _dumps(cat)
                                    + b',"ts":', ph == "X", name, cat)
        return tag

    def args(self, a: Any) -> bytes:
        if type(a) is not dict or not a:
            return NO_ARGS
        if "role" in a or "rank" in a:   # a copy: an orjson result pins a ~4 KB buffer while it lives
            return b"{" + _dumps({**self.base, **a})[1:]
        return b"," + _dumps(a)[1:]

    def record(self, ev: list) -> tuple:
        ph, start, d = ev[0], ev[3], ev[4]
        negd = (-d if d > 0 else 0) if ph == "X" else 0
        return start, negd, ev[5], self.tag(ph, ev[1], ev[2]), self.args(ev[6] if len(ev) > 6 else None)


@dataclass
class SessionEvents:
    """One session's events, without holding them: count, earliest start, the lanes they use
    (first-appearance order) and their sorted runs."""

    n: int = 0
    min_start: int | None = None
    lanes: dict = field(default_factory=dict)  # lane -> None, insertion-ordered
    runs: list = field(default_factory=list)   # callables -> iterator of records, each run sorted

    def add_run(self, records: list, run: Callable[[], Iterator[tuple]]) -> None:
        """A sorted run of `records` (their first is the earliest)."""
        self.n += len(records)
        if records and (self.min_start is None or records[0][0] < self.min_start):
            self.min_start = records[0][0]
        self.runs.append(run)


def in_memory(sess: segment.Session) -> SessionEvents:
    """A fully read session as SessionEvents (one run, sorted here; stable, as the old merge)."""
    out = SessionEvents()
    make = RecordMaker(sess.header)
    records = [make.record(ev) for ev in sess.events]
    for ev in sess.events:
        if ev[5] not in out.lanes:
            out.lanes[ev[5]] = None
    records.sort(key=_order)
    out.add_run(records, lambda: iter(records))
    return out


class Spill:
    """An unlinked temporary file of sorted runs (marshal blocks), read back by offset."""

    def __init__(self, directory: str | None = None):
        try:
            self._fh = tempfile.TemporaryFile(prefix=".merge-spill-", dir=directory)
        except OSError:  # a read-only timeline directory: the system's temporary directory
            self._fh = tempfile.TemporaryFile(prefix="mindspeed-merge-spill-")
        self.bytes = 0

    def write_run(self, records: list) -> Callable[[], Iterator[tuple]]:
        """Sort `records` (in place) and spill them; returns the run's reader."""
        records.sort(key=_order)   # stable: equal keys keep file order, as the old global sort did
        blocks = []
        write = self._fh.write
        for i in range(0, len(records), BLOCK_EVENTS):
            data = marshal.dumps(records[i:i + BLOCK_EVENTS])
            write(data)
            blocks.append((self.bytes, len(data)))
            self.bytes += len(data)
        fh = self._fh
        return lambda: _read_run(fh, blocks)

    def close(self) -> None:
        self._fh.close()


def _read_run(fh: Any, blocks: list) -> Iterator[tuple]:
    fh.flush()  # what write_run buffered must be on the file before pread
    fd = fh.fileno()
    for offset, length in blocks:
        yield from marshal.loads(os.pread(fd, length, offset))


@dataclass
class Scanned(object):
    """What scan_segments found: the sessions (as read_segments gives them, events left out), their
    SessionEvents (by id of the session), the problems as warnings, and the spill behind them."""

    sessions: list = field(default_factory=list)  # (path, Session)
    warnings: list = field(default_factory=list)
    events: dict = field(default_factory=dict)    # id(Session) -> SessionEvents
    spill: Spill | None = None


def scan_segments(paths: list[str], spill_dir: str | None = None, chunk: int = CHUNK_EVENTS) -> Scanned:
    """Read each segment once: sessions kept without events, events spilled in sorted runs. A file
    that cannot be read is a warning; the others are still scanned."""
    out = Scanned(spill=Spill(spill_dir))
    tags: dict = {}  # shared by every session: one tag object per (ph, name, cat)
    for path in paths:
        try:
            _scan_one(path, out, chunk, tags)
        except OSError as exc:
            out.warnings.append(f"{os.path.basename(path)}: unreadable ({exc}); skipped")
    return out


def _scan_one(path: str, out: Scanned, chunk: int, tags: dict) -> None:
    seg = segment.Segment(path=path)
    pending: list = []   # the current session's records not yet spilled
    sev = None           # the current session's SessionEvents (None: no session, or a skipped one)
    make = lanes = None
    tag_of, args_of = None, None
    spill = out.spill

    with open_regular(path) as fh:   # never a FIFO: it would block the merge
        for lineno, line in enumerate(fh, 1):
            try:
                rec = _loads(line)
            except _JSONDecodeError:
                if line.strip():  # blank lines are skipped silently, as the reader does
                    seg.problems.append((lineno, "not valid JSON (truncated by a crash?): skipped"))
                continue
            if len(line) > LONG_LINE:   # (a length compare: the only cost on the hot path)
                rec = within_nesting(seg, rec, lineno)
                if rec is None:
                    continue
            # the hot path: a well-formed event of a valid session (segments.apply_record's own checks;
            # orjson gives exact ints / strs, so `type(x) is int` is _is_int)
            if sev is not None and type(rec) is list and len(rec) >= 6 and type(rec[3]) is int \
                    and type(rec[4]) is int and type(rec[5]) is int and type(rec[0]) is str:
                ph, start, d, lane = rec[0], rec[3], rec[4], rec[5]
                negd = (-d if d > 0 else 0) if ph == "X" else 0
                if lane not in lanes:
                    lanes[lane] = None
                try:   # RecordMaker.tag and .args, inline for the common case
                    tag = tags[(ph, rec[1], rec[2])]
                except (KeyError, TypeError):  # new, or a name that is not text
                    tag = tag_of(ph, rec[1], rec[2])
                a = rec[6] if len(rec) > 6 else None
                if type(a) is dict and a and "role" not in a and "rank" not in a:
                    a = b"," + _dumps(a)[1:]
                else:
                    a = args_of(a)
                pending.append((start, negd, lane, tag, a))
                if len(pending) >= chunk:
                    sev.add_run(pending, spill.write_run(pending))
                    pending = []
                continue
            n_before = len(seg.sessions)
            segment.apply_record(seg, rec, lineno)  # the reader's own validation: headers, records, bad events
            if len(seg.sessions) != n_before:  # a new header: the previous session is complete
                if pending:
                    sev.add_run(pending, spill.write_run(pending))
                    pending = []
                sess = seg.sessions[-1]
                sev = None if sess is None else SessionEvents()
                if sev is not None:
                    out.events[id(sess)] = sev
                    make = RecordMaker(sess.header, tags)
                    lanes, tag_of, args_of = sev.lanes, make.tag, make.args
            elif sev is not None and seg.sessions[-1].events:  # never, but apply_record may keep an event
                sev_rec = seg.sessions[-1].events.pop()
                if sev_rec[5] not in lanes:
                    lanes[sev_rec[5]] = None
                pending.append(make.record(sev_rec))
    if pending:
        sev.add_run(pending, spill.write_run(pending))
    sessions = segment.finish_segment(seg).sessions
    out.warnings += [f"{os.path.basename(path)}:{ln}: {msg}" for ln, msg in seg.problems]
    out.sessions += [(path, s) for s in sessions]
