"""Reading and writing summary.json (the analysis' own output, read back by report, compare and
RunAnalysis) and capture_totals.jsonl beside it.

Each capture's complete per-name totals (`op_totals`, `kernel_totals`: most of a capture's bytes)
do not stay in the driver's memory nor in summary.json: `TotalsSpool` appends them to
capture_totals.jsonl as each capture finishes, and the capture's record keeps
`totals: {file, offset, bytes}`, where its line is. `TotalsReader` gives them back, from that
file or inline (summary.json files written before, and analyses that write nothing, hold them
inline). Above formats.INLINE_DETAIL_MAX captures, `commit` writes each capture's per-capture lists
(formats.DETAIL_KEYS) into its line too, `write_summary` leaves them out of summary.json and
`load_summary` puts them back. summary.json is written piece by piece, so it never exists whole in
memory as bytes.
"""
from __future__ import annotations

import os
import secrets
import tempfile
from pathlib import Path
from typing import Any, BinaryIO, Callable, Iterator

import orjson

from mindspeed_profiler.core import formats, jsonsafe
from mindspeed_profiler.core.warn import warn_once
from mindspeed_profiler.core import fileio
from mindspeed_profiler.core.fileio import atomic_path

from mindspeed_profiler.analysis.models.rows import INT64, Record, compact
from mindspeed_profiler.analysis.parsing.numbers import finite_number
from mindspeed_profiler.analysis.models.summary_shape import SummaryShapeError, checked

TOTALS_KEYS = ("op_totals", "kernel_totals")
_OPTS = orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS
_LINE_OPTS = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS


class Summary(dict):
    """A summary.json dict that knows its directory (`where`), where its captures' totals file is.
    Serialises as the plain dict it is."""

    where: Path | None = None


def located(summary: dict, where: str | Path | None) -> Summary:
    """`summary` as a Summary whose totals are read from the directory `where`."""
    s = summary if isinstance(summary, Summary) else Summary(summary)
    s.where = Path(where) if where is not None else None
    return s


# -- summary.json ------------------------------------------------------------------------------

def dumps(v: Any, option: int = _LINE_OPTS, found: list[tuple[str, str]] | None = None, where: str = "") -> bytes:
    """The one JSON encoder of the analysis' outputs (summary.json, capture_totals.jsonl): orjson,
    and where it refuses a value (a crafted input that got past its reader), the value made one it
    takes, never an exception: an integer beyond 64 bits as a float (null beyond a float's range,
    as orjson writes inf), a lone surrogate (a non-UTF-8 file name, a JSON escape read leniently) as
    its backslash escape. `found` gets where, for a warning."""
    try:
        return orjson.dumps(v, option=option)
    except TypeError:   # orjson.JSONEncodeError is one
        return orjson.dumps(jsonsafe.carried(v, finite_number, (-INT64, INT64), found, where), option=option)


def _nested(data: bytes, depth: int) -> bytes:
    """An indented value re-indented `depth` levels deeper (JSON strings hold no raw newline)."""
    return data.replace(b"\n", b"\n" + b"  " * depth)


def write_summary(path: Path, summary: dict) -> None:
    """summary.json, the same bytes as one indented orjson dump, written value by value (captures one
    at a time) so that a 10,000-capture summary is never one string in memory. A value JSON cannot
    carry as it is (dumps()) is written as dumps() makes it, with a warning, never a lost summary."""
    found: list[tuple[str, str]] = []

    def write(fh: BinaryIO) -> None:
        _write_object(fh, summary, found)
        if found:   # rewrite with the warnings in (rare: only for crafted inputs)
            fh.seek(0)
            fh.truncate()
            clean = dict(summary)
            clean["warnings"] = list(summary.get("warnings") or []) + _found_warnings(found)
            _write_object(fh, clean, [])

    fileio.write_atomic(path, write)   # its permissions and O_NOFOLLOW; the old summary stays whole on failure


def _write_object(fh: BinaryIO, summary: dict, found: list[tuple[str, str]]) -> None:
    def put(data: bytes) -> None:
        fileio._write_bytes(fh, data)   # the one seam where the tests fill the disk

    if not summary:
        put(b"{}")
        return
    put(b"{")
    for n, (k, v) in enumerate(summary.items()):
        put((b",\n  " if n else b"\n  ") + dumps(str(k), found=found, where=f"/{k}") + b": ")
        if isinstance(v, list) and v:   # captures, findings, stage_rank...: one item at a time
            put(b"[")
            for i, c in enumerate(v):
                if k == "captures":
                    c = without_detail(c)
                put((b",\n    " if i else b"\n    ") + _nested(dumps(c, _OPTS, found, f"/{k}/{i}"), 2))
            put(b"\n  ]")
        else:
            put(_nested(dumps(v, _OPTS, found, f"/{k}"), 1))
    put(b"\n}")


def moved_detail(c: Any) -> list[str]:
    """The keys of capture record `c` that are in its capture_totals.jsonl line, not in summary.json."""
    ref = c.get("totals") if isinstance(c, dict) else None
    keys = ref.get("detail") if isinstance(ref, dict) else None
    return [k for k in keys if isinstance(k, str)] if isinstance(keys, list) else []


def without_detail(c: Any) -> Any:
    """A capture record as summary.json holds it: without the keys moved to its totals line."""
    moved = moved_detail(c)
    return {k: v for k, v in c.items() if k not in moved} if moved else c


def _found_warnings(found: list[tuple[str, str]]) -> list[str]:
    out = []
    for kind, what in (("int", "integer(s) beyond 64 bits written as floats (null beyond a float's range)"),
                       ("text", "text(s) with a lone surrogate (not UTF-8) written with it as its backslash escape")):
        at = [w for w, k in found if k == kind]
        if at:
            out.append(f"{len(at)} {what} (first at {at[0]}): a crafted value in an input")
    return out


def load_summary(path: Path) -> Summary:
    """summary.json, knowing its directory (its captures' totals file is there), each capture's
    detail moved to capture_totals.jsonl (a run of more than formats.INLINE_DETAIL_MAX captures) put
    back in its record, read one line at a time. A file that is not JSON, or not of the shape the
    readers rely on (summary_shape), is a SummaryShapeError (a ValueError) naming it and the field."""
    path = Path(path)
    try:
        data = orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError as exc:   # a truncated file: name it
        raise SummaryShapeError(f"{path}: not JSON ({exc})") from None
    return checked(inline_detail(located(data, path.parent)) if isinstance(data, dict) else data, path)


def inline_detail(summary: Summary) -> Summary:
    """`summary` with every capture's moved detail keys back in its record (a missing file or a
    corrupt line is reported once by TotalsReader; that capture stays without them)."""
    captures = summary.get("captures")
    if not isinstance(captures, list) or not any(moved_detail(c) for c in captures):
        return summary
    with TotalsReader(summary) as rd:
        for c in captures:
            moved = moved_detail(c)
            line = rd.line(c) if moved else None
            for k in moved:
                if line is not None and k in line:
                    c[k] = line[k]
    return summary


def find_summary(p: str | Path) -> Path | None:
    """summary.json given a run directory, an analysis directory or the file itself."""
    p = Path(p)
    for cand in (p, p / formats.SUMMARY_FILE, p / formats.ANALYSIS_DIR / formats.SUMMARY_FILE):
        if cand.is_file() and cand.name == formats.SUMMARY_FILE:
            return cand
    return None


# -- capture_totals.jsonl ----------------------------------------------------------------------

def share_strings(v: Any, table: dict) -> Any:
    """`v` with every string (value or key) replaced, in place, by the first equal one seen: the ranks of a
    job share their op, kernel and stage names, so the driver keeps each name once, not once per
    capture (in place: rebuilding every container would fragment the heap it is meant to spare)."""
    if isinstance(v, str):
        return table.setdefault(v, v)
    if isinstance(v, dict):
        for k, x in v.items():
            if isinstance(x, str):
                v[k] = table.setdefault(x, x)
            elif isinstance(x, (dict, list)):
                share_strings(x, table)
        if any(table.setdefault(k, k) is not k for k in v if isinstance(k, str)):   # its keys too
            items = list(v.items())
            v.clear()
            v.update((table.setdefault(k, k) if isinstance(k, str) else k, x) for k, x in items)
    elif isinstance(v, list):
        for i, x in enumerate(v):
            if isinstance(x, str):
                v[i] = table.setdefault(x, x)
            elif isinstance(x, (dict, list)):
                share_strings(x, table)
    return v


class TotalsSpool:
    """capture_totals.jsonl while the batch runs: `take(result)` moves a finished capture's totals
    into the file (one line: {"path", "op_totals", "kernel_totals"}) and leaves `totals: {file,
    offset, bytes}` in its record; `commit(out, captures)` writes the file beside summary.json in
    the captures' order. Spooled first in `spool_dir` (the output directory, where known), else in
    the system's temporary directory."""

    def __init__(self, spool_dir: Path | None = None, detail_max: int = formats.INLINE_DETAIL_MAX):
        self.spool_dir = spool_dir
        self.detail_max = detail_max   # above this many captures, commit() moves their formats.DETAIL_KEYS too
        self.n_detail = 0               # captures whose detail commit() moved
        self.names: dict = {}
        self._fh: BinaryIO | None = None
        self._tmp: Path | None = None
        self._offset = 0
        self._taken: set[int] = set()   # the records whose line is in the spool (ids: they stay alive in the batch)
        self.error: str | None = None   # why the totals stayed inline (the file could not be written)

    def _open(self) -> BinaryIO:
        if self._fh is None:
            try:
                assert self.spool_dir is not None
                self.spool_dir.mkdir(parents=True, exist_ok=True)
                self._tmp = self.spool_dir / f".{formats.CAPTURE_TOTALS_FILE}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
                self._fh = open(self._tmp, "xb")
            except (OSError, AssertionError):
                fd, name = tempfile.mkstemp(prefix=".capture_totals.", suffix=".tmp")
                self._tmp, self._fh = Path(name), os.fdopen(fd, "wb")
        return self._fh

    def take(self, res: dict) -> dict:
        """The result with its capture's totals moved to the file (and its strings shared)."""
        c = share_strings(res["capture"], self.names)
        moved = {k: c[k] for k in TOTALS_KEYS if k in c}
        if not moved or self.error:
            return res
        line = dumps({"path": c.get("path"), **moved}) + b"\n"
        try:
            self._open().write(line)
        except (OSError, TypeError) as exc:   # disk full, a crafted value: keep them inline, say so once
            self.error = f"{formats.CAPTURE_TOTALS_FILE} could not be written ({type(exc).__name__}: {exc}): " \
                         "the captures' op_totals / kernel_totals stay in summary.json"
            return res
        for k in moved:
            del c[k]
        c["totals"] = {"file": formats.CAPTURE_TOTALS_FILE, "offset": self._offset, "bytes": len(line)}
        self._taken.add(id(c))
        self._offset += len(line)
        return res

    def commit(self, out: Path, captures: list[dict]) -> None:
        """The file into `out`, in the order of `captures` (summary.json's: the same bytes whatever
        order the captures finished in, here or on a Ray cluster), each record's `totals` updated;
        read from the spool one line at a time. With more than `detail_max` captures, each record's
        formats.DETAIL_KEYS go into its line too (named in `totals.detail`; write_summary then
        leaves them out of summary.json; the records in memory keep them)."""
        if self._fh is None:
            return
        detail = formats.DETAIL_KEYS if len(captures) > self.detail_max else ()
        self._fh.close()
        self._fh = None
        assert self._tmp is not None
        with atomic_path(out / formats.CAPTURE_TOTALS_FILE) as dst, open(self._tmp, "rb") as src, open(dst, "wb") as fh:
            offset = 0
            for c in captures:
                ref = c.get("totals")
                if not isinstance(ref, dict) or id(c) not in self._taken:
                    continue
                src.seek(ref["offset"])
                line = src.read(ref["bytes"])
                moved = [k for k in detail if k in c]
                if moved:
                    line = dumps({**orjson.loads(line), **{k: c[k] for k in moved}}) + b"\n"
                self.n_detail += bool(moved)
                fh.write(line)
                c["totals"] = {"file": formats.CAPTURE_TOTALS_FILE, "offset": offset, "bytes": len(line),
                               **({"detail": moved} if moved else {})}
                offset += len(line)
        self.discard()

    def discard(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None
        if self._tmp is not None:
            try:
                os.unlink(self._tmp)
            except OSError:
                pass
            self._tmp = None


class TotalsReader:
    """A capture's op_totals / kernel_totals: inline (older summary.json, an analysis that wrote
    nothing), else its line of the totals file in the summary's directory. A missing file or a
    corrupt line is reported once (logger `mindspeed_profiler`) and that capture has no totals
    (None, as a capture without them: compare then uses its top lists); the others are read."""

    def __init__(self, summary: dict):
        self.where: Path | None = getattr(summary, "where", None)
        self._files: dict[str, BinaryIO | None] = {}
        self._last: tuple[int, dict | None] | None = None

    def __enter__(self) -> "TotalsReader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        for fh in self._files.values():
            if fh is not None:
                fh.close()
        self._files.clear()

    def get(self, c: dict, key: str) -> list | None:
        if key in c:
            return c[key]
        if not isinstance(c.get("totals"), dict):
            return None
        line = self.line(c)
        return None if line is None else line.get(key)

    def line(self, c: dict) -> dict | None:
        """Capture record `c`'s whole line of the totals file (None: it has none, or it cannot be read)."""
        if not isinstance(c.get("totals"), dict):
            return None
        if self._last is None or self._last[0] != id(c):   # op_totals then kernel_totals: one read
            self._last = (id(c), self._line(c, c["totals"]))
        return self._last[1]

    def _file(self, name: str) -> BinaryIO | None:
        if name not in self._files:
            if self.where is None:
                warn_once(("totals-where", name), "the captures' op_totals / kernel_totals are in %s beside summary.json, "
                          "but this summary's directory is not known (load it with outputs.load_summary or "
                          "RunAnalysis): they are left out", name)
                self._files[name] = None
            else:
                path = self.where / name
                try:
                    self._files[name] = open(path, "rb")
                except OSError as exc:
                    warn_once(("totals-file", str(path)), "%s: cannot be read (%s): the captures' op_totals / "
                              "kernel_totals are left out", path, exc)
                    self._files[name] = None
        return self._files[name]

    def _line(self, c: dict, ref: dict) -> dict | None:
        name = ref.get("file")
        if not isinstance(name, str) or os.path.basename(name) != name:
            return self._corrupt(c, str(name), f"the summary names the file {name!r}, not a file beside it")
        fh = self._file(name)
        if fh is None:
            return None
        offset, size = ref.get("offset"), ref.get("bytes")
        if not isinstance(offset, int) or not isinstance(size, int) or offset < 0 or size <= 0:
            return self._corrupt(c, name, f"its place in the file is not valid ({offset!r}, {size!r})")
        fh.seek(offset)
        data = fh.read(size)
        try:
            line = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            return self._corrupt(c, name, f"the {size} bytes at offset {offset} are not a JSON line ({exc})")
        if not isinstance(line, dict) or line.get("path") != c.get("path"):
            return self._corrupt(c, name, f"the line at offset {offset} is not this capture's "
                                          f"(it names {line.get('path') if isinstance(line, dict) else line!r})")
        return line

    def _corrupt(self, c: dict, name: str, why: str) -> None:
        where = self.where / name if self.where is not None else name
        warn_once(("totals-line", str(where), c.get("path")), "%s: capture %s: %s; its op_totals / kernel_totals are "
                  "left out (the file is rewritten by the next analysis)", where, c.get("path"), why)
        return None


def each_capture_totals(key: str, names: tuple[str, ...]) -> Callable[[dict], Iterator[Record]]:
    """A row model's select() over every capture's totals list `key` (compact rows: the fields in
    order), wherever they are (inline or in the totals file)."""
    def select(summary: dict) -> Iterator[Record]:
        with TotalsReader(summary) as rd:
            for cid, c in enumerate(summary.get("captures") or []):
                for r in rd.get(c, key) or ():
                    yield cid, c, dict(zip(names, r))
    select.where = compact(key, names)   # type: ignore[attr-defined]  # where the analyzers put them (RowModel.put)
    return select
