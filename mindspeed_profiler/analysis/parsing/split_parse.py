"""One large trace parsed by two processes: this one reads the first half of the event array, a
forked helper the second (docs/perf_analysis.md, "Two processes for one trace").

Only where a core would otherwise sit idle: `HELPERS`, the one global here, is how many helper
processes a parse may fork now. It is 0 unless the caller says otherwise (collect.run_captures
allows one for a lone capture analysed with `-j 2` or more), so a pool of workers that already
keeps the cores busy never forks more.

The protocol, and why the result is exactly that of one reader:
- The helper finds a boundary B past half the uncompressed bytes (it seeks there, or inflates and
  drops the bytes before it): the first "}, {" from which the bytes that follow read as whole
  values at one depth, never closing a structure they did not open (a "}, {" between the objects
  of a list inside an event's args closes that list soon after). It sends B, parses from B to the
  end of the file with the usual streaming reader, and returns its EventTable part and the bytes
  after the array.
- This process parses up to B and cuts there. Its parse of the batch that ends at B proves that B
  is a boundary between two top-level events (a cut inside a string or a nested value cannot
  parse: the rule jsonscan's fast cut already relies on). Where that batch does not parse, or the
  helper found no boundary, this process reads on to the end alone; where the helper fails or
  dies after B, the caller parses the file again in one process. Never a different result.
- Relative times need the same base: the helper waits for this process' t0_us (the base of the
  file's first complete events) before it adds a batch, so its rows are the same floats. (When the
  first half has no complete event with a time, the helper waits for the whole first half.)
- EventTable.absorb appends the helper's rows after ours and re-interns its strings in its
  first-seen order (the ids one reader would have given them).
- One documented difference (docs/perf_analysis.md): typed decoding gives up on a file after
  MAX_MISSES batches in a row it cannot take; the helper's decoder starts afresh, so the one input
  where the typed and dict paths differ (a number beyond float64 in a field nothing reads) may be
  read by the other path in the second half.
- `mid` comes from the gzip trailer's size, the last member's for a multi-member file: only the
  balance of the two halves suffers.
"""
from __future__ import annotations

import contextlib
import os
import pickle
import struct
import sys
import warnings
from pathlib import Path
from typing import Iterator

from mindspeed_profiler.core import reaper

from . import jsonscan, typed_events
from .events import EventTable

HELPERS = 0                # helper processes a parse may fork now (see the module doc)
MIN_BYTES = 32 << 20       # uncompressed bytes below which one process is faster (fork, two inflates)
WINDOW = 4 << 20           # how far past the middle the helper looks for a boundary
CHECK = 64 << 10           # the bytes after a candidate that must read as whole values at one depth
MAX_TRIES = 256            # candidates judged before the helper gives up
_NO_BOUND = -1
_B = struct.Struct("<q")


@contextlib.contextmanager
def helpers(n: int) -> Iterator[None]:
    """Allow `n` helper processes to the parses inside the block."""
    global HELPERS
    before, HELPERS = HELPERS, n
    try:
        yield
    finally:
        HELPERS = before


def worth_splitting(path: Path) -> bool:
    if HELPERS < 1 or not hasattr(os, "fork") or not sys.platform.startswith("linux"):
        return False
    try:
        return jsonscan.expanded_size(path) >= MIN_BYTES
    except OSError:
        return False


def load_split(path: Path, table: EventTable) -> dict | None:
    """Parse `path` into `table` with a helper process; returns the top-level object without its
    events (as jsonscan.load_trace does), or None when the split was abandoned (then `table` holds
    a partial parse: the caller starts again with a fresh one). Format errors of the head are
    raised here, before any fork; the helper's are left to the one-process parse that follows."""
    total = jsonscan.expanded_size(path)
    chunks = jsonscan.chunks(path)
    with jsonscan.reading():
        head, carry, bare = jsonscan.read_head(chunks)
    mid = total // 2
    if len(head) >= mid:
        return None
    fds: list[int] = []
    try:
        to_main, from_helper = os.pipe()
        fds += (to_main, from_helper)
        from_main, to_helper = os.pipe()
        fds += (from_main, to_helper)
        with warnings.catch_warnings():   # (3.12+ warns about fork with threads: the helper only parses and exits)
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
    except OSError:   # no fds or processes left: one process does it
        for fd in fds:
            os.close(fd)
        return None
    if pid == 0:   # the helper: whatever happens, it ends here and never returns into the caller
        try:
            _helper(path, mid, from_main, from_helper)
        finally:
            os._exit(1)
    try:
        os.close(from_helper)
        os.close(from_main)
        with os.fdopen(to_main, "rb") as reader, os.fdopen(to_helper, "wb", buffering=0) as writer:
            return _main(path, table, head, carry, bare, chunks, mid, reader, writer)
    finally:
        reaper.let_go(pid)   # its exit (freeing its half's memory) on its own core, not waited for


def _main(path: Path, table: EventTable, head: bytes, carry: bytes, bare: bool, chunks: Iterator[bytes],
          mid: int, reader, writer) -> dict | None:
    t0_sent = False

    def send_t0() -> None:
        nonlocal t0_sent
        if not t0_sent:
            t0_sent = True
            with contextlib.suppress(OSError):
                writer.write(pickle.dumps(table.t0_us))

    def on_batch(batch) -> None:
        table.add_batch(batch)
        if table.t0_us is not None:
            send_t0()

    stop = _Stop(mid, reader)
    decode = typed_events.BatchDecoder()
    with jsonscan.reading():
        tail = jsonscan.read_events(carry, chunks, on_batch, decode, pos=len(head), stop=stop)
    if tail is not None:   # no boundary near the middle: this process read the whole file
        return jsonscan.rest_of(head, tail, bare, path)
    send_t0()   # None when nothing before B had a complete event: the helper takes its own
    data = reader.read()   # (outside the try: a time limit's exception must go through)
    try:
        kind, part, tail = pickle.loads(data)
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, ImportError, IndexError):
        return None   # the helper died or sent nothing usable
    if kind != "ok":
        return None
    table.absorb(part)
    return jsonscan.rest_of(head, tail, bare, path)


class _Stop:
    """jsonscan.Stop for this process: the helper's boundary, asked for (blocking) once the bytes
    read reach the middle; none (the helper found none, or died) means read on to the end."""

    def __init__(self, mid: int, reader) -> None:
        self.active = True
        self.mid = mid
        self.reader = reader
        self.value: int | None = None

    def bound(self, end: int) -> int | None:
        if self.value is None and end >= self.mid:
            got = self.reader.read(_B.size)
            b = _B.unpack(got)[0] if len(got) == _B.size else _NO_BOUND
            if b == _NO_BOUND:
                self.active = False
                return None
            self.value = b
        return self.value


def _helper(path: Path, mid: int, from_main: int, to_main: int) -> None:
    """The helper's whole life: find B, send it, parse from B, send the part and the tail, exit."""
    code = 0
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)   # nothing of the helper's reaches the user's terminal
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        warnings.simplefilter("ignore")
        with os.fdopen(to_main, "wb") as out, os.fdopen(from_main, "rb") as inp:
            chunks = jsonscan.chunks(path, start=mid)
            found = _bound(chunks)
            if found is None:
                out.write(_B.pack(_NO_BOUND))
                return
            bound, carry = mid + found[0], found[1]
            out.write(_B.pack(bound))
            out.flush()
            table = EventTable()
            waiting = True

            def on_batch(batch) -> None:
                nonlocal waiting
                if waiting:   # this process' base first: the rows are then the same floats
                    waiting = False
                    table.t0_us = pickle.load(inp)
                table.add_batch(batch)

            try:
                tail = jsonscan.read_events(carry, chunks, on_batch, typed_events.BatchDecoder(), pos=bound)
                msg = ("ok", table.part(), tail)
            except Exception as exc:   # noqa: BLE001 - the one-process parse reports it properly
                msg = ("error", repr(exc)[:500], None)
            out.write(pickle.dumps(msg, protocol=pickle.HIGHEST_PROTOCOL))
    except BaseException:  # noqa: BLE001 - whatever happens, the helper must not live on
        code = 1
    finally:
        os._exit(code)


def _bound(chunks: Iterator[bytes]) -> tuple[int, bytes] | None:
    """(offset of the first likely boundary, the bytes from it on) within the first WINDOW bytes
    of chunks: a "}, {" after which the next CHECK bytes are whole values at one depth (the
    bracket scan never goes below it). This process' parse is still what proves it."""
    buf = b""
    tried = at = 0   # at: where the next candidate is looked for (past those judged)
    for chunk in chunks:
        buf += chunk
        while tried < MAX_TRIES:
            found = jsonscan.first_boundary(buf[at:])
            if found < 0:
                break
            at += found
            if len(buf) - at < CHECK and len(buf) <= WINDOW:
                at -= found   # read more before judging this one
                break
            tried += 1
            if jsonscan.reads_as_values(buf[at:at + CHECK]):
                return at, buf[at:]
        if len(buf) > WINDOW or tried >= MAX_TRIES:
            return None
    return None


def read_into(path: Path) -> tuple[EventTable, dict | None]:
    """(table, rest) by two processes, or (a fresh table, None) when the caller must read it alone."""
    if worth_splitting(path):
        table = EventTable()
        rest = load_split(path, table)
        if rest is not None:
            return table, rest
    return EventTable(), None   # (an abandoned split's table holds a partial parse)
