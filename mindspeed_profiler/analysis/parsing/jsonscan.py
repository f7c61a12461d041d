"""Load trace JSON (plain or gzip) fast, streaming the event array in small batches.

Files under STREAM_THRESHOLD: one `orjson.loads`. Larger ones: the bytes are read in CHUNK pieces,
each cut at the last "}, {" near its end and parsed with orjson (a valid parse proves the cut is a
top-level event boundary); when that fails, a vectorised bracket / quote scan finds the boundaries.
Memory stays at a few chunks whatever the file size, and the batches are small enough that the
caller builds its columns while the parsed dicts are still in the CPU cache. The rest of the
top-level object (distributedInfo, deviceProperties, ...) is kept and parsed at the end.
"""
from __future__ import annotations

import contextlib
import gzip
import re
from pathlib import Path
from typing import Callable, Iterator, Protocol

import numpy as np
import orjson

from mindspeed_profiler.core.fileio import open_regular
from mindspeed_profiler.core.jsonsafe import loads_lenient

from . import gzip_stream, prefetch
from .gzip_stream import expanded_size  # noqa: F401  (importable from here as before)

# Streaming is not only for memory: parsing ~256 KB batches and building columns from them while
# the fresh dicts are still in the CPU cache is ~2x faster than one orjson.loads of the whole
# file followed by a pass over millions of cold dicts (benchmarks/bench_analyse.py).
STREAM_THRESHOLD = 1 << 20    # bytes of JSON above which we stream
CHUNK = 256 << 10

_QUOTE, _BSLASH = ord('"'), ord("\\")
_OPEN = (ord("{"), ord("["))
_CLOSE = (ord("}"), ord("]"))
_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')


class TraceFormatError(ValueError):
    """The file is not a trace we can read (reason in the message)."""


def read_bytes(path: Path) -> bytes:
    """The file's bytes, transparently gunzipped (by magic number, not by name)."""
    with open_regular(path) as f:
        data = f.read()
    return gzip.decompress(data) if data[:2] == gzip_stream.GZIP_MAGIC else data


def _lenient(data: bytes, exc: Exception):
    """What orjson refuses but real writers produce: NaN / Infinity (Python's json.dump writes
    them), invalid UTF-8 in a name, and an integer past a double (one crafted value then fails its
    event or field, not the file). Tried only after orjson failed; re-raises otherwise. Python's
    parser makes a lone surrogate of a JSON escape of one: loads_lenient writes it as text."""
    msg = str(exc)
    if "UTF-8" in msg or "utf-8" in msg:
        try:
            return orjson.loads(data.decode("utf-8", "replace"))
        except orjson.JSONDecodeError as exc2:
            exc = exc2
    if b"NaN" in data or b"Infinity" in data or "parsed as double" in str(exc):
        try:
            return loads_lenient(data.decode("utf-8", "replace"))
        except (ValueError, RecursionError):
            pass
    raise exc


def loads(data: bytes, path: Path):
    if not data.strip():
        raise TraceFormatError("empty file")
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        try:
            return _lenient(data, exc)
        except ValueError as exc2:
            raise TraceFormatError(f"invalid or truncated JSON: {exc2}") from None


@contextlib.contextmanager
def reading() -> Iterator[None]:
    """A file that cannot be read (I/O error, bad or truncated gzip) as a TraceFormatError."""
    try:
        yield
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        raise TraceFormatError(f"cannot read: {type(exc).__name__}: {exc}") from None


def load_trace(path: Path, on_batch: Callable[[list], None], stream: bool | None = None,
               decode: Callable[[bytes], object | None] | None = None) -> dict:
    """Parse a Chrome/Kineto trace, handing its events to `on_batch` in one or more lists.

    `decode` (streamed files only): a faster parser of the bytes of a JSON array of events, whose
    result goes to `on_batch` instead of the list of dicts; where it returns None (it cannot
    take that batch), the batch is parsed with orjson as without it.
    Returns the top-level object without `traceEvents` (a bare-array trace returns {}).
    """
    path = Path(path)
    if stream is None:
        stream = expanded_size(path) > STREAM_THRESHOLD
    if not stream:
        with reading():
            obj = loads(read_bytes(path), path)
        if isinstance(obj, list):
            on_batch(obj)
            return {}
        if not isinstance(obj, dict) or not isinstance(obj.get("traceEvents"), list):
            keys = list(obj)[:8] if isinstance(obj, dict) else type(obj).__name__
            raise TraceFormatError(f"not a Chrome/Kineto trace: no 'traceEvents' list (top level: {keys})")
        on_batch(obj.pop("traceEvents"))
        return obj
    with reading():
        # (two arguments without a decoder: tests stand in for _stream with that signature)
        return _stream(path, on_batch) if decode is None else _stream(path, on_batch, decode)


def chunks(path: Path, start: int = 0) -> Iterator[bytes]:
    """The file's (uncompressed) bytes in pieces of at most CHUNK, from offset `start` of the
    uncompressed bytes (a plain file seeks there; a gzip one is inflated and the bytes before it
    dropped)."""
    inflated = prefetch.take(path)   # inflated already, while the command imported the analysis
    if inflated is not None:
        yield from prefetch.pieces_from(inflated, start, CHUNK)
        return
    with open_regular(path) as f:
        if f.read(2) == gzip_stream.GZIP_MAGIC:
            f.seek(0)
            skipped = 0
            for b in _inflate(f):
                if skipped < start:
                    if skipped + len(b) <= start:
                        skipped += len(b)
                        continue
                    b, skipped = b[start - skipped:], start
                yield b
            return
        f.seek(start)
        while True:
            b = f.read(CHUNK)
            if not b:
                return
            yield b


RAW_READ = 64 << 10   # compressed bytes per read: ~CHUNK of JSON at a trace's usual 5-10x ratio


def _inflate(f) -> Iterator[bytes]:
    """gzip_stream.inflate in CHUNK pieces, RAW_READ compressed bytes at a time (read when called)."""
    return gzip_stream.inflate(f, CHUNK, RAW_READ)


def _event_ends(buf: bytes) -> tuple[np.ndarray, int]:
    """Offsets just past each complete top-level value in `buf` (buf starts between values,
    outside any string), and the offset of the closing ']' of the array (-1 if not in buf)."""
    a = np.frombuffer(buf, dtype=np.uint8)
    quotes = np.flatnonzero(a == _QUOTE)
    if len(quotes):
        # a quote preceded by an odd run of backslashes is escaped (rare: checked one by one)
        maybe = quotes[(quotes > 0) & (a[np.maximum(quotes - 1, 0)] == _BSLASH)]
        if len(maybe):
            escaped = []
            for q in maybe:
                k = q - 1
                while k >= 0 and a[k] == _BSLASH:
                    k -= 1
                if (q - 1 - k) % 2:
                    escaped.append(q)
            quotes = np.setdiff1d(quotes, np.array(escaped, dtype=quotes.dtype))
    # only the brackets matter: one outside a string has an even number of quotes before it
    br = np.flatnonzero((a == _OPEN[0]) | (a == _OPEN[1]) | (a == _CLOSE[0]) | (a == _CLOSE[1]))
    br = br[(np.searchsorted(quotes, br) & 1) == 0]
    delta = np.where((a[br] == _OPEN[0]) | (a[br] == _OPEN[1]), 1, -1)
    depth = np.cumsum(delta)
    closing = delta < 0
    closes, dc = br[closing], depth[closing]
    ends = closes[dc == 0] + 1
    below = closes[dc < 0]
    return ends, int(below[0]) if len(below) else -1


def _stream(path: Path, on_batch: Callable[[list], None],
            decode: Callable[[bytes], object | None] | None = None) -> dict:
    pieces = chunks(path)
    head, carry, bare = read_head(pieces)
    tail = read_events(carry, pieces, on_batch, decode)
    assert tail is not None   # (None only with a stop)
    return rest_of(head, tail, bare, path)


def read_head(chunks: Iterator[bytes]) -> tuple[bytes, bytes, bool]:
    """Read `chunks` up to the start of the event array: (the bytes before it, the bytes of the
    array read so far, whether the file is a bare array). Raises TraceFormatError for an empty
    file or one without a traceEvents list."""
    hbuf = bytearray()  # bytes before the event array (top-level keys), until the array starts
    saw_any = False
    for chunk in chunks:
        saw_any = saw_any or bool(chunk.strip())
        hbuf += chunk
        first = _NON_WS.search(hbuf)
        if first is None:
            continue
        if hbuf[first.start()] == ord("["):
            return bytes(hbuf[:first.start() + 1]), bytes(hbuf[first.start() + 1:]), True
        # search only the new bytes (plus an overlap for a key cut by the chunk edge)
        m = _EVENTS_KEY.search(hbuf, max(0, len(hbuf) - len(chunk) - 4096))
        if m:
            return bytes(hbuf[:m.end()]), bytes(hbuf[m.end():]), False
        if len(hbuf) > (256 << 20):
            raise TraceFormatError("not a Chrome/Kineto trace: no 'traceEvents' list")
    if not saw_any:
        raise TraceFormatError("empty file")
    raise TraceFormatError("not a Chrome/Kineto trace: no 'traceEvents' list")


class Stop(Protocol):
    """Where read_events is to stop (split_parse.py). While `active`, `bound(end)` is called with
    the offset just past the bytes buffered and returns the boundary once it is known (None
    before); when there is none to stop at, `active` is False (set by the stop, or by read_events
    for a boundary that does not parse) and reading goes on to the end."""
    active: bool

    def bound(self, end: int) -> int | None: ...


def read_events(carry: bytes, chunks: Iterator[bytes], on_batch: Callable[[list], None],
                decode: Callable[[bytes], object | None] | None = None, pos: int = 0,
                stop: Stop | None = None) -> bytes | None:
    """Parse the event array from `carry` (its bytes read so far, outside any event) and the rest of
    `chunks`, handing batches to `on_batch`; returns the bytes from the array's closing ']' on.

    `stop` (split_parse.py; `pos`: the offset of carry's first byte): once its boundary B is
    reached, the batch up to B is parsed and nothing after it (returns None). A boundary proves
    itself by that batch's parse; where it does not parse (B inside a string or a nested value),
    the stop is turned off and reading goes on to the end as without one. (The bracket scan below
    never passes B: it reads only bytes buffered, and B is cut at as soon as they reach it.)
    """
    tail_parts: list[bytes] | None = None
    for chunk in _with_first(b"", chunks):   # carry alone first: the array may start mid-chunk
        if tail_parts is not None:
            tail_parts.append(chunk)
            continue
        buf = carry + chunk
        end = pos + len(buf)
        if stop is not None and stop.active:
            bound = stop.bound(end)
            if bound is not None and bound <= end:
                batch = _batch_of(buf[:bound - pos], decode) if bound >= pos else None
                if batch is not None:
                    on_batch(batch)
                    return None
                stop.active = False   # no boundary for this reader: on alone (the caller drops its helper)
        cut = _fast_cut(buf)
        if cut > 0:
            # common case: parse up to the last "}, {" near the end; a valid array means the
            # cut is a top-level event boundary (a cut inside a string or a nested value
            # cannot balance), so no full bracket scan is needed
            batch = _batch_of(buf[:cut], decode)
            if batch is not None:
                on_batch(batch)
                del batch
                carry = buf[cut:]
                pos = end - len(carry)
                continue
        carry, tail_found = _scan_events(buf, on_batch)
        if tail_found is not None:
            tail_parts, carry = [tail_found], b""
        else:
            # whitespace and commas between events are dropped now, not carried and re-scanned
            # with every chunk (a trace padded with megabytes of blanks stays linear)
            carry = carry.lstrip(_BLANKS)
        pos = end - len(carry)
    if tail_parts is None and carry:
        carry, tail_found = _scan_events(carry, on_batch)
        if tail_found is not None:
            tail_parts = [tail_found]
    if tail_parts is None:
        raise TraceFormatError("invalid or truncated JSON: the event array never ends")
    return b"".join(tail_parts)


def _with_first(first: bytes, rest: Iterator[bytes]) -> Iterator[bytes]:
    yield first
    yield from rest


def _batch_of(events: bytes, decode: Callable[[bytes], object | None] | None):
    """The events of `events` (whole events, maybe with blanks and commas around them) as one
    batch: `decode`'s result, else orjson's list; None when they do not parse as an array."""
    data = b"[" + events.lstrip().lstrip(b",") + b"]"
    batch = decode(data) if decode is not None else None
    if batch is None:
        try:
            batch = orjson.loads(data)
        except orjson.JSONDecodeError:
            return None
    return batch


def rest_of(head: bytes, tail: bytes, bare: bool, path: Path) -> dict:
    """The top-level object without its events, from the bytes around the event array."""
    if bare:
        if tail.strip() not in (b"]",):
            raise TraceFormatError("invalid JSON after the event array")
        return {}
    rest = loads(head + tail, path)
    if not isinstance(rest, dict):
        raise TraceFormatError("not a Chrome/Kineto trace")
    rest.pop("traceEvents", None)
    return rest


_NON_WS = re.compile(rb"\S")
_BLANKS = b" \t\r\n,"
_SEP = re.compile(rb"\}\s*,\s*\{")
_FAST_WINDOW = 64 << 10
_FAST_NEAR = 4 << 10   # where _fast_cut looks first


def reads_as_values(buf: bytes, n: int = 2) -> bool:
    """Whether buf (starting between values, outside any string) holds at least n whole values and
    closes no bracket it did not open: what the bytes after a top-level boundary look like."""
    ends, close = _event_ends(buf)
    return close < 0 and len(ends) >= n


def first_boundary(buf: bytes) -> int:
    """Offset just past the first '}' followed by ', {' in buf (-1: none): a candidate boundary
    between two events, which a parse must confirm (split_parse.py)."""
    m = _SEP.search(buf)
    return -1 if m is None else m.start() + 1


def _fast_cut(buf: bytes) -> int:
    """Offset just past the last '}' that is followed by ', {' in the last _FAST_WINDOW bytes of buf
    (-1: none). Looked for in the last _FAST_NEAR bytes first: two separators cannot overlap (none
    holds a '}' past its first byte), so the last one found there is the window's last one, without
    a match per event of the whole window (a trace of small events: 68 us per 256 KB batch)."""
    lo = max(0, len(buf) - _FAST_WINDOW)
    for start in (max(lo, len(buf) - _FAST_NEAR), lo):
        last = None
        for m in _SEP.finditer(buf, start):
            last = m
        if last is not None:
            return last.start() + 1
        if start == lo:
            break
    return -1


def _scan_events(buf: bytes, on_batch: Callable[[list], None]) -> tuple[bytes, bytes | None]:
    """Full bracket scan of buf: parse its complete events; (carry, tail after the array or None)."""
    ends, close = _event_ends(buf)
    if close >= 0:
        ends = ends[ends <= close]
    if len(ends):
        cut = int(ends[-1])
        _parse_batch(buf[:cut], on_batch)
        buf = buf[cut:]
        close = close - cut if close >= 0 else -1
    if close >= 0:
        return b"", buf[close:]
    return buf, None


def _parse_batch(buf: bytes, on_batch: Callable[[list], None]) -> None:
    body = buf.strip().lstrip(b",").strip()
    if not body:
        return
    data = b"[" + body + b"]"
    try:
        batch = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        try:
            batch = _lenient(data, exc)
        except ValueError as exc2:
            raise TraceFormatError(f"invalid JSON in the event array: {exc2}") from None
    on_batch(batch)
