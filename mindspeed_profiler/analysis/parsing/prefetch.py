"""A command's one large gzip trace inflated by a child process while the command imports the
analysis (issue 34: the analyse command's imports take ~0.2 s of one core while the other sits
idle; the inflate takes ~0.1 s per 50 MB).

A process, not a thread: zlib hands the GIL back between its output blocks, and each time the
inflating thread then waits for the importing one's switch interval: measured on the 53.7 MB CUDA
trace, a thread overlapped little (imports 0.17 -> 0.24 s, the inflate 0.09 -> 0.19 s). The child
is forked at the command's start, when this process is small and has no other thread, and writes
into a memory file (memfd) that this process maps once the child has answered; the split parse's
helper (forked later) inherits the mapping.

`start(path)` begins; `jsonscan.chunks` then serves that file's bytes from the mapping (`take`,
which waits for the child), so that neither this process nor split_parse's helper inflates it
again; `release()` drops them once the trace is parsed. The child keeps the file open until then and
is let go (core/reaper.py), so that its exit, not this process, frees the pages. Only a file whose size and mtime are still
those it had when inflated is served, only a file that is no decompression bomb is inflated
(gzip_stream.looks_like_bomb: those are parsed in a capped worker), MIN_BYTES to MAX_BYTES by its
trailer, and only when its bytes are exactly what the trailer says (a multi-member file, whose
trailer gives its last member's size, goes to the streaming read). Anything that goes wrong leaves
the file to the streaming read, which reports it.

`_PENDING`, the one global here, is the inflation under way or done and not yet released (one per
process: the command starts at most one). Standard library only: it runs before numpy is loaded.
"""
from __future__ import annotations

import contextlib
import mmap
import os
import signal
import struct
import sys
import warnings
from pathlib import Path
from typing import Iterator

from mindspeed_profiler.core import reaper
from mindspeed_profiler.core.fileio import open_regular

from . import gzip_stream

MIN_BYTES = 16 << 20     # uncompressed bytes below which the inflate is too short to be worth a process
MAX_BYTES = 1 << 30      # the most inflated ahead (the memory file is the trace's own size, uncompressed)
PIECE = 4 << 20          # uncompressed bytes per zlib call in the child
MAX_FILES_SEEN = 2000    # entries `single_trace` looks at before it gives up
_SIZE = struct.Struct("<q")
_FAILED = -1


class _Inflation:
    """The child inflating `path` into a memory file (`size` bytes by the trailer), and its answer;
    `buf`, this process' read-only mapping of the file, once the child has answered."""

    def __init__(self, path: Path, size: int) -> None:
        st = path.stat()
        self.key = (_resolved(path), st.st_size, st.st_mtime_ns)
        self.size = size
        # the child writes the bytes into a memory file (write(), not stores into a shared mapping:
        # a page taken by write() is not zeroed first nor faulted in, 32 against 62 ms per 92 MB here)
        self.fd = os.memfd_create("mindspeed-prefetch", getattr(os, "MFD_CLOEXEC", 0))
        self.buf: mmap.mmap | None = None
        self.done: int | None = None   # bytes the child wrote (the trailer's size), or _FAILED
        fds = [self.fd]
        try:
            reader, writer = os.pipe()
            fds += (reader, writer)
            hold, self.holding = os.pipe()   # the child keeps the file open until this end closes (or a kill)
            fds += (hold, self.holding)
            with warnings.catch_warnings():   # (3.12+ warns about fork with threads: none here yet)
                warnings.simplefilter("ignore", DeprecationWarning)
                self.pid = os.fork()
        except OSError:
            for fd in fds:
                os.close(fd)
            raise
        if self.pid == 0:   # the child: whatever happens, it ends here
            code = 1
            try:
                os.close(reader)
                os.close(self.holding)
                code = _inflate_into(path, self.fd, size, writer)
                # the file stays open here until release(): then this process's exit frees its pages
                # on its own core, not the parser's close (9-14 ms of the command on the real traces)
                with contextlib.suppress(OSError):
                    os.read(hold, 1)
            finally:
                os._exit(code)
        os.close(writer)
        os.close(hold)
        self.reader = reader

    def wait(self) -> int:
        """The child's answer (bytes written, or _FAILED), waiting for it; the bytes mapped then."""
        if self.done is None:
            got = b""
            with contextlib.suppress(OSError):
                got = os.read(self.reader, _SIZE.size)
            self.done = _SIZE.unpack(got)[0] if len(got) == _SIZE.size else _FAILED
            if self.done > 0:
                try:
                    self.buf = mmap.mmap(self.fd, self.done, mmap.MAP_SHARED, mmap.PROT_READ)
                except (OSError, ValueError):
                    self.done = _FAILED
        return self.done

    def close(self) -> None:
        """Unmapped here first (the child still holds the pages, so this is cheap), then the child is
        killed and left to exit (core/reaper.py), freeing them."""
        buf, self.buf = self.buf, None
        if buf is not None:
            try:
                buf.close()
            except BufferError:   # a reader still holds a view: unmapped when that goes
                pass
        if self.pid > 0:
            reaper.let_go(self.pid)
            self.pid = 0
        for fd in (self.reader, self.holding, self.fd):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.reader = self.holding = self.fd = -1


def _inflate_into(path: Path, fd: int, size: int, answer: int) -> int:
    """In the child: inflate `path` into the file `fd`, then send the byte count (or _FAILED) on
    `answer`."""
    total = _FAILED
    try:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)   # (the parent's handlers are not the child's)
        pos = 0
        with open_regular(path) as f:
            for piece in gzip_stream.inflate(f, PIECE, 1 << 20):
                if pos + len(piece) > size:
                    break   # more than the trailer says (several members): the streaming read does it
                view = memoryview(piece)
                while view:   # (a memory file takes it whole; a short write is not an error)
                    view = view[os.write(fd, view):]
                pos += len(piece)
            else:
                total = pos if pos == size else _FAILED
    except Exception:   # noqa: BLE001 - the streaming read that follows reports it properly
        total = _FAILED
    with contextlib.suppress(OSError):
        os.write(answer, _SIZE.pack(total))
    return 0


_PENDING: _Inflation | None = None


def _resolved(path: Path) -> str:
    try:
        return os.fspath(Path(path).resolve())
    except (OSError, RuntimeError):   # (a link loop)
        return os.fspath(path)


def start(path: Path) -> bool:
    """Begin inflating `path` in a child process when it is a gzip file worth it (MIN_BYTES to
    MAX_BYTES uncompressed by its trailer, no bomb) on Linux; True when begun. Releases any
    earlier one."""
    global _PENDING
    release()
    if not hasattr(os, "fork") or not sys.platform.startswith("linux"):
        return False
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
        _PENDING = _Inflation(path, expanded)
    except (OSError, ValueError, AttributeError):   # no memory file here (os.memfd_create), no process left
        return False
    return True


def take(path: Path) -> memoryview | None:
    """The uncompressed bytes of `path` when they were inflated ahead (waiting for the child), else
    None."""
    p = _PENDING
    if p is None or p.fd < 0 or not _same_file(path, p.key):
        return None
    n = p.wait()
    return memoryview(p.buf)[:n] if n > 0 and p.buf is not None else None


def _same_file(path: Path, key: tuple[str, int, int]) -> bool:
    try:
        st = path.stat()
    except OSError:
        return False
    return (_resolved(path), st.st_size, st.st_mtime_ns) == key


def release(path: Path | None = None) -> None:
    """Drop the bytes (only those of `path` when given); a child still inflating is killed."""
    global _PENDING
    p = _PENDING
    if p is None or (path is not None and p.key[0] != _resolved(path)):
        return
    _PENDING = None
    p.close()


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


def pieces_from(data: memoryview, start: int, size: int) -> Iterator[bytes]:
    """`data` from offset `start`, in pieces of at most `size`."""
    for i in range(start, len(data), size):
        yield bytes(data[i:i + size])
