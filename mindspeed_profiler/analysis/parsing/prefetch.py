"""A command's one large gzip trace inflated by a thread while the command imports the analysis
(issue 34: the analyse command's imports take ~0.2 s of one core while the other sits idle, and the
inflate, zlib with the GIL released, ~0.1 s per 50 MB).

`start(path)` begins; `jsonscan.chunks` then serves that file's bytes from memory (`take`), waiting
for the inflate to end, so that neither this process nor the helper split_parse forks (which
inherits the bytes) inflates it again; `release()` drops them once the trace is parsed. Only a file
whose size and mtime are still those it had when inflated is served, only a file that is no
decompression bomb is inflated (gzip_stream.looks_like_bomb: those are parsed in a capped worker),
and at most MAX_BYTES of it (a file whose gzip trailer understates its size is abandoned there).
Anything that goes wrong leaves the file to the usual streaming read, which reports it.

`_PENDING`, the one global here, is the inflation under way or done and not yet released (one per
process: the command starts at most one). Standard library only: it runs before numpy is loaded.
"""
from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Iterator

from mindspeed_profiler.core.fileio import open_regular

from . import gzip_stream

MIN_BYTES = 16 << 20     # uncompressed bytes below which the inflate is too short to be worth a thread
MAX_BYTES = 1 << 30      # the most this holds in memory (the trace's own size, uncompressed)
PIECE = 4 << 20          # uncompressed bytes per zlib call: how soon an abandoned inflation stops
MAX_FILES_SEEN = 2000    # entries `single_trace` looks at before it gives up


class _Inflation:
    def __init__(self, path: Path) -> None:
        st = path.stat()
        self.path = path
        self.key = (_resolved(path), st.st_size, st.st_mtime_ns)
        self.pieces: list[bytes] = []
        self.ok = False
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="mindspeed-prefetch", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        total = 0
        try:
            with open_regular(self.path) as f:
                for piece in gzip_stream.inflate(f, PIECE, 1 << 20):
                    total += len(piece)
                    if self.stop.is_set() or total > MAX_BYTES:
                        return
                    self.pieces.append(piece)
            self.ok = True
        except Exception:   # noqa: BLE001 - the streaming read that follows reports it properly
            pass
        finally:
            if not self.ok:
                self.pieces = []

    def matches(self, path: Path) -> bool:
        try:
            st = path.stat()
            return (_resolved(path), st.st_size, st.st_mtime_ns) == self.key
        except OSError:
            return False


_PENDING: _Inflation | None = None


def _resolved(path: Path) -> str:
    try:
        return os.fspath(Path(path).resolve())
    except (OSError, RuntimeError):   # (a link loop)
        return os.fspath(path)


def start(path: Path) -> bool:
    """Begin inflating `path` in a thread when it is a gzip file worth it (MIN_BYTES to MAX_BYTES
    uncompressed, no bomb); True when begun. Replaces (and stops) any earlier one."""
    global _PENDING
    release()
    try:
        size = path.stat().st_size
        expanded = gzip_stream.expanded_size(path)
        with open_regular(path) as f:
            is_gzip = f.read(2) == gzip_stream.GZIP_MAGIC
    except OSError:
        return False
    if not is_gzip or not MIN_BYTES <= expanded <= MAX_BYTES or gzip_stream.looks_like_bomb(size, expanded):
        return False
    try:
        _PENDING = _Inflation(path)
    except (OSError, RuntimeError):   # (no thread can be started)
        return False
    return True


def take(path: Path) -> list[bytes] | None:
    """The uncompressed bytes of `path` in pieces when they were inflated here (waiting for the
    inflate to end), else None."""
    p = _PENDING
    if p is None or not p.matches(path):
        return None
    p.thread.join()
    return p.pieces if p.ok else None


def release(path: Path | None = None) -> None:
    """Drop the bytes (only those of `path` when given); an inflation still under way stops within
    one PIECE."""
    global _PENDING
    p = _PENDING
    if p is None or (path is not None and p.key[0] != _resolved(path)):
        return
    _PENDING = None
    p.stop.set()
    p.thread.join()
    p.pieces = []


def single_trace(target: str) -> Path | None:
    """The one gzip file under `target` (itself when a file), when there is exactly one among the
    first MAX_FILES_SEEN entries: a lone capture, analysed in this process (several go to a pool of
    workers, where bytes inflated here would be of no use)."""
    path = Path(target)
    if path.is_file():
        return path if path.name.endswith(".gz") else None
    found: list[Path] = []
    seen = 0
    for root, dirs, files in os.walk(path):
        seen += len(dirs) + len(files)
        found += (Path(root) / f for f in files if f.endswith(".gz"))
        if len(found) > 1 or seen > MAX_FILES_SEEN:
            return None
    return found[0] if found else None


def pieces_from(pieces: list[bytes], start: int, size: int) -> Iterator[bytes]:
    """`pieces` (a file's bytes in order) from offset `start`, in pieces of at most `size`."""
    pos = 0
    for piece in pieces:
        end = pos + len(piece)
        if end > start:
            view = memoryview(piece)
            for i in range(max(start - pos, 0), len(piece), size):
                yield bytes(view[i:i + size])
        pos = end
