"""The analysis cache (issue 34): a re-analysis of a directory takes each capture whose input files
are unchanged from what the last analysis computed, and analyses only the rest (new captures of a
running job, a rewritten trace). The cross-capture tables and the outputs are built as before, from
the same per-capture results, so a warm run writes what a cold one writes.

Layout (docs/formats.md, "The analysis cache"), under the output directory (never in a capture):

    <out>/.analysis_cache/discovery.json        the captures found, for a directory listing
    <out>/.analysis_cache/captures/<key>.json   one capture's analyse_capture result, for its files

Every entry carries the code's identity (`code_identity`) and the options a result depends on; an
entry written by other code or for other options is a miss. The directory listing (path, size,
mtime_ns of every file discovery can see) decides whether discovery itself is skipped: then the
input kinds, the parsers and the analyzers are never imported. Only a result that survives a JSON
round trip unchanged (no NaN, no tuple, string keys) is stored: a cached result always equals the
one computed. A capture whose metadata says it is not final (`recording`, `exporting`) and a failed
analysis are never stored. An unreadable entry is said in one line and its capture analysed again.
"""
from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path
from typing import Callable, Iterable

import orjson

from mindspeed_profiler.core import fileio, formats

from mindspeed_profiler.analysis.inputs.record import Capture
from mindspeed_profiler.analysis.pipeline.discover import dir_identity, walk

CACHE_DIR = formats.ANALYSIS_CACHE_DIR   # under the output directory (a dot: discovery never walks into it)
CACHE_SCHEMA = 1                    # bump when a per-capture result changes shape in a way the source stats miss
NOT_FINAL = ("recording", "exporting", "held")   # formats.CAPTURE_STATUSES still being written
_PACKAGE = Path(__file__).resolve().parents[2]   # mindspeed_profiler/

Listing = dict[str, tuple[int, int]]   # path relative to the root -> (size, mtime_ns)


def code_identity(package: Path = _PACKAGE) -> str:
    """The analysis code's identity: CACHE_SCHEMA, the Python version and a digest of the size and
    mtime of every source file the analysis runs (analysis/, core/) and of the package's
    __init__.py (its version). The stats, not only a constant to bump: whoever changes an analyzer
    need not remember the cache (an editable install, a patch); reinstalling the same code costs one
    cold run. ~1 ms."""
    h = hashlib.sha1(f"{CACHE_SCHEMA}/{sys.version_info[:2]}".encode())
    sources = [package / "__init__.py"]
    for sub in ("analysis", "core"):
        for d, dirs, files in os.walk(package / sub):
            dirs[:] = sorted(x for x in dirs if x != "__pycache__")
            sources += [Path(d) / n for n in sorted(files) if n.endswith(".py")]
    for f in sources:
        try:
            st = os.stat(f)
        except OSError:
            continue
        h.update(f"{os.path.relpath(f, package)}:{st.st_size}:{st.st_mtime_ns};".encode())
    return h.hexdigest()


def listing(root: Path, skip: Iterable[Path] = (), skip_dirs: tuple[str, ...] = (formats.ANALYSIS_DIR, formats.REQUESTS_DIR)) -> Listing:
    """Every file discovery can see under `root` (as discovery walks: links followed, hidden
    directories and the top-level outputs skipped; also `skip`, e.g. the output directory), with
    its size and mtime_ns; a file given as the root is its own listing."""
    root = Path(root)
    if root.is_file():
        st = root.stat()
        return {root.name: (st.st_size, st.st_mtime_ns)}
    # each skipped directory as (device, inode), as walk() knows a directory: realpath() per
    # directory lstat'ed every level above it, O(depth^2) calls (a 1,100-deep tree: 53 s a listing)
    skipped = set(filter(None, map(dir_identity, skip)))
    out: Listing = {}
    for d, dirs, files in walk(root):
        dirs[:] = [x for x in dirs if not x.startswith(".") and not (d == root and x in skip_dirs)
                   and not (skipped and dir_identity(d / x) in skipped)]
        base = os.path.relpath(d, root)
        for n in files:
            try:
                st = os.stat(d / n)
            except OSError:   # vanished, a broken link: its state is that it cannot be read
                out[os.path.normpath(os.path.join(base, n))] = (-1, -1)
                continue
            out[os.path.normpath(os.path.join(base, n))] = (st.st_size, st.st_mtime_ns)
    return out


def fingerprint(root: Path, cap: Capture, files: Listing) -> list:
    """What a capture's analysis reads, as [path, size, mtime_ns] rows: every file under its
    directory (the Ascend output directory: its capture directory, the one above), and its listed
    files (a loose trace, a timeline's segments)."""
    tops = [os.path.normpath(cap.path)]
    if Path(tops[0]).name == formats.ASCEND_OUTPUT_DIR:
        tops.append(os.path.dirname(tops[0]) or ".")
    rows = {p: v for p, v in files.items()
            if any(t == "." or p == t or p.startswith(t + os.sep) for t in tops)}
    for f in cap.files:
        p = os.path.normpath(f)
        if p not in rows:
            try:
                st = os.stat(Path(root) / p)
                rows[p] = (st.st_size, st.st_mtime_ns)
            except OSError:
                rows[p] = (-1, -1)
    return [[p, *rows[p]] for p in sorted(rows)]


def cacheable(result: dict) -> bool:
    """Whether one analyse_capture result may be stored: analysed (not failed), and final (its
    metadata does not say it is still being recorded or exported)."""
    c = result.get("capture") or {}
    status = (c.get("meta") or {}).get("status") if isinstance(c.get("meta"), dict) else None
    return c.get("status") == "ok" and status not in NOT_FINAL and result.get("events") is None


class AnalysisCache:
    """One output directory's cache. `options`: what the per-capture results depend on besides the
    input files (top_n). Never raises on a bad entry or a write that fails: a miss, said in one line."""

    def __init__(self, directory: Path, options: dict, log: Callable[[str], None],
                 identity: str | None = None):
        self.dir = Path(directory)
        self.identity = identity or code_identity()
        self.options = options
        self.log = log
        self.hits = 0
        self.stored = 0
        self._fps: dict[str, list] = {}
        self._inputs: dict[str, dict] = {}
        self._write_failed = False

    # ------------------------------------------------------------------- discovery
    def discovered(self, root: Path, files: Listing, run: str | None) -> list[Capture] | None:
        """The captures found last time, when the directory listing is the same; else None."""
        entry = self._read(self.dir / "discovery.json")
        if (entry is None or entry.get("root") != str(root) or entry.get("run") != run
                or entry.get("listing") != _digest(files)):
            return None
        try:
            return [Capture(**c) for c in entry["captures"]]
        except (TypeError, KeyError) as exc:
            self.log(f"analyse: cache entry {self.dir / 'discovery.json'} unreadable ({type(exc).__name__}: {exc}): "
                     "the directory is discovered again")
            return None

    def keep_discovery(self, root: Path, files: Listing, run: str | None, caps: list[Capture]) -> None:
        """Keep what discovery found, when JSON gives it back unchanged."""
        found = [c.to_dict() for c in caps]
        try:
            if orjson.loads(orjson.dumps(found)) != found:
                return
        except (TypeError, ValueError):
            return
        self._write(self.dir / "discovery.json", {"root": str(root), "run": run, "listing": _digest(files),
                                                  "captures": found})

    # ------------------------------------------------------------------- captures
    def split(self, root: Path, caps: list[Capture], files: Listing) -> tuple[dict[int, dict], list[int]]:
        """({index: cached result}, [indexes to analyse])."""
        hits, todo = {}, []
        for i, c in enumerate(caps):
            fp = fingerprint(root, c, files)
            self._fps[c.path], self._inputs[c.path] = fp, c.to_dict()
            res = self._lookup(c, fp)
            if res is None:
                todo.append(i)
            else:
                hits[i] = res
        self.hits = len(hits)
        return hits, todo

    def _lookup(self, c: Capture, fp: list) -> dict | None:
        path = self._entry_path(c.path)
        if not path.exists():
            return None
        entry = self._read(path)
        if entry is None or entry.get("input") != self._inputs[c.path] or entry.get("files") != fp:
            return None
        res = entry.get("result")
        if not (isinstance(res, dict) and isinstance(res.get("capture"), dict)):
            self.log(f"analyse: cache entry {path} unreadable (no result): {c.path} analysed again")
            return None
        return res

    def store(self, result: dict) -> None:
        """Keep one fresh result (before anything moves parts of it elsewhere), when it may be kept."""
        path = (result.get("capture") or {}).get("path")
        if path not in self._fps or not cacheable(result):
            return
        entry = {**self._header(), "input": self._inputs[path], "files": self._fps[path], "result": result}
        try:
            data = orjson.dumps(entry)
            if orjson.loads(data)["result"] != result:   # NaN, a tuple...: the cache would not give it back
                return
        except (TypeError, ValueError, orjson.JSONEncodeError):
            return
        if self._write_bytes(self._entry_path(path), data):
            self.stored += 1

    def prune(self, keep: Iterable[str]) -> None:
        """Remove the entries of captures no longer found (one directory's worth of files)."""
        wanted = {self._entry_path(p).name for p in keep}
        try:
            names = os.listdir(self.dir / "captures")
        except OSError:
            return
        for n in names:
            if n.endswith(".json") and n not in wanted:
                try:
                    os.unlink(self.dir / "captures" / n)
                except OSError:
                    pass

    # ------------------------------------------------------------------- files
    def _header(self) -> dict:
        return {"schema": CACHE_SCHEMA, "code": self.identity, "options": self.options}

    def _entry_path(self, capture_path: str) -> Path:
        return self.dir / "captures" / (hashlib.sha1(capture_path.encode("utf-8", "surrogateescape")).hexdigest()[:24] + ".json")

    def _read(self, path: Path) -> dict | None:
        """An entry of this code and these options; None when absent, stale or unreadable (said)."""
        try:
            entry = orjson.loads(fileio.read_regular_file(path, 1 << 34))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            self.log(f"analyse: cache entry {path} unreadable ({type(exc).__name__}: {exc}): analysed again")
            return None
        if not isinstance(entry, dict):
            self.log(f"analyse: cache entry {path} unreadable (not a JSON object): analysed again")
            return None
        if any(entry.get(k) != v for k, v in self._header().items()):
            return None   # other code or options: a miss, overwritten when analysed
        return entry

    def _write(self, path: Path, obj: dict) -> None:
        try:
            data = orjson.dumps({**self._header(), **obj})
        except (TypeError, orjson.JSONEncodeError):
            return
        self._write_bytes(path, data)

    def _write_bytes(self, path: Path, data: bytes) -> bool:
        if self._write_failed:
            return False
        try:
            fileio.write_atomic(path, data)
            return True
        except OSError as exc:   # a full disk, a read-only output: the analysis goes on, said once
            self._write_failed = True
            self.log(f"analyse: cannot write the analysis cache in {self.dir} ({type(exc).__name__}: {exc}); "
                     "the outputs are written, the next analysis starts cold")
            return False


def _digest(files: Listing) -> str:
    """The listing's digest. A file name is any bytes (os.fsdecode gives a non-UTF-8 one as lone
    surrogates, which JSON cannot encode): each is hashed as its bytes on disk."""
    h = hashlib.sha1()
    for path, (size, mtime) in sorted(files.items()):
        h.update(os.fsencode(path) + b"\0" + f"{size}:{mtime}\n".encode())
    return h.hexdigest()
