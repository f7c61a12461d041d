"""Files, written and read safely: the one I/O module of the package (standard library only, it
imports nothing of mindspeed_profiler, beside formats.py which names the files). The runtime
(run.json, capture metadata, on-demand state, process-level records) and the analysis
(summary.json, report.html, analysis.db, the merged timeline) both use it.

- Writes are atomic: a temporary file beside the target, renamed into place; a full disk or a crash
  leaves the previous file, never half a new one, and never the temporary file.
- Read-modify-write updates (run.json's lists) run under an exclusive lock (`.<file>.lock` beside
  it, flock; the empty file stays, as a lock file must) so concurrent writers never lose each
  other's entries.
- Files that someone else may have put there are read only as regular files of bounded size:
  opened without blocking (a FIFO or a device is refused, never waited on) and, where asked,
  without following a link.
"""
from __future__ import annotations

import contextlib
import datetime as _dt
import errno
import json
import os
import secrets
import stat
from pathlib import Path
from typing import Any, BinaryIO, Callable, Iterator

# ------------------------------------------------------------------------------------- writing


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """A temporary path beside `path` to write (with any tool: sqlite3, gzip...); renamed onto
    `path` when the block ends without an exception, removed when it raises. The file gets the
    permissions of the other outputs (0666 less the umask)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def write_atomic(path: str | os.PathLike, data: bytes | Callable[[BinaryIO], None]) -> Path:
    """Write `data` (bytes, or a function writing to the open binary file) atomically."""
    path = Path(path)
    with atomic_path(path) as tmp:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o666)
        with os.fdopen(fd, "wb") as fh:
            if callable(data):
                data(fh)
            else:
                _write_bytes(fh, data)
    return path


def _write_bytes(fh: BinaryIO, data: bytes) -> None:
    fh.write(data)   # one seam, where tests fill the disk


def write_json_atomic(path: str | os.PathLike, obj: Any) -> Path:
    """JSON (indent 1; anything else written as its str()) atomically: readers never see half a
    file and concurrent writers cannot interleave."""
    return write_atomic(path, json.dumps(obj, indent=1, default=str).encode("utf-8"))


@contextlib.contextmanager
def locked(path: str | os.PathLike) -> Iterator[None]:
    """An exclusive lock for updates of `path` (its lock file beside it). Where the file system
    has no flock the update runs unlocked (it is still atomic)."""
    import fcntl

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock_path(path), os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o666)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError:
            pass
        yield
    finally:
        os.close(fd)   # closing releases the lock


def lock_path(path: Path) -> Path:
    return path.with_name(f".{path.name}.lock")


def read_json_object(path: str | os.PathLike) -> dict[str, Any] | None:
    """The JSON object in `path`, or None when absent, unreadable or not an object."""
    try:
        with open_regular(path) as fh:   # never a FIFO: a run.json put there would block the reader
            data = json.load(fh)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def update_json(path: str | os.PathLike, change: Callable[[dict[str, Any] | None], dict[str, Any] | None]) -> Path | None:
    """Read `path` (a JSON object, or None when absent / unreadable), let `change` return the new
    object (None: write nothing), write it atomically: all under the lock."""
    path = Path(path)
    with locked(path):
        new = change(read_json_object(path))
        return write_json_atomic(path, new) if new is not None else None


def open_append(path: str | os.PathLike, truncate: bool = False) -> BinaryIO:
    """`path` opened for appending (created when absent; emptied first with truncate=True), only
    when it is a regular file: a link at the last component is not followed (its target is never
    truncated or written) and a FIFO or a device is refused without blocking (a FIFO with no reader
    would hang the open, one with a reader would swallow the data). Raises OSError or UnsafeFile."""
    fd = _regular_fd(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), "written")
    try:
        if truncate:   # after the check, not O_TRUNC: nothing but a regular file is ever emptied
            os.ftruncate(fd, 0)
        return os.fdopen(fd, "ab")
    except BaseException:
        os.close(fd)
        raise


def _regular_fd(path: str | os.PathLike, flags: int, verb: str) -> int:
    """`path` opened with `flags`, without blocking, only when it is a regular file (a FIFO or a
    device is refused, never waited on; with O_NOFOLLOW a link says so); then set to blocking, as
    a regular file never blocks. The one check of every open, for reading or appending, of a file
    someone else may have put there."""
    try:
        fd = os.open(path, flags | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0), 0o666)
    except OSError as exc:
        if flags & getattr(os, "O_NOFOLLOW", 0) and os.path.islink(path):
            raise UnsafeFile(f"{Path(path).name}: a symbolic link, not followed here") from None
        if exc.errno == errno.ENXIO:   # what a FIFO without a reader (or a socket) answers to a non-blocking open
            raise UnsafeFile(f"{Path(path).name}: not a regular file (a FIFO or a socket): not {verb}") from None
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UnsafeFile(f"{Path(path).name}: not a regular file (a FIFO, a device or a directory): not {verb}")
        os.set_blocking(fd, True)
        return fd
    except BaseException:
        os.close(fd)
        raise


# ------------------------------------------------------------------------------------- reading


class UnsafeFile(OSError, ValueError):
    """Not a regular file, too large, or a link where none is allowed; str() says which. An OSError
    (every reader that reports "cannot read" reports this too) and, as it always was, a ValueError."""


def open_regular(path: str | os.PathLike, follow_links: bool = True) -> BinaryIO:
    """`path` opened for binary reading, only when it is a regular file: opened without blocking
    (a FIFO or a device is refused, never waited on; the one check every reader of an input uses)
    and, with follow_links=False, without following a link at the last component. Raises OSError
    (missing, unreadable) or UnsafeFile."""
    flags = os.O_RDONLY | (0 if follow_links else getattr(os, "O_NOFOLLOW", 0))
    return os.fdopen(_regular_fd(path, flags, "read"), "rb")


def check_regular(path: str | os.PathLike) -> None:
    """Raise UnsafeFile unless `path` is a regular file (links followed), for readers that open by
    name themselves (sqlite3.connect): a FIFO would block them forever. OSError when missing."""
    if not stat.S_ISREG(os.stat(path).st_mode):
        raise UnsafeFile(f"{Path(path).name}: not a regular file (a FIFO, a device or a directory): not read")


def connect_readonly(path: str | os.PathLike):
    """A read-only sqlite3 connection to the regular file `path` (check_regular first: sqlite opens
    by name, and would wait on a FIFO forever); the path is URI-quoted, so `?` or `#` in it are
    file name, not query."""
    import sqlite3   # here, not at the top: the runtime imports this module and needs no sqlite

    check_regular(path)
    return sqlite3.connect(Path(path).resolve().as_uri() + "?mode=ro", uri=True)


def read_regular_file(path: str | os.PathLike, max_bytes: int, follow_links: bool = True) -> bytes:
    """The bytes of a regular file of at most `max_bytes` (opened as open_regular opens it).
    Raises OSError (missing, unreadable) or UnsafeFile."""
    with open_regular(path, follow_links) as fh:
        size = os.fstat(fh.fileno()).st_size
        if size > max_bytes:
            raise UnsafeFile(f"{Path(path).name}: {size} bytes, more than the {max_bytes} read here")
        chunks, left = [], max_bytes + 1
        while left > 0:   # in pieces: read(max_bytes + 1) would allocate the whole bound up front
            b = fh.read(min(left, 1 << 20))
            if not b:
                break
            chunks.append(b)
            left -= len(b)
        data = b"".join(chunks)
    if len(data) > max_bytes:   # grew while being read
        raise UnsafeFile(f"{Path(path).name}: more than the {max_bytes} bytes read here")
    return data


# ------------------------------------------------------------------------------------- time


def utc_now_iso() -> str:
    """Now, UTC, ISO 8601 to the millisecond with a Z (the time stamps of our JSON files)."""
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def unwritable(path: str) -> str | None:
    """Why `path` cannot be used as an output directory, or None (the config checks say it at load).
    Creates nothing."""
    try:
        target = Path(path).expanduser()
        target.exists()
    except (OSError, RuntimeError, ValueError) as exc:
        return f"got {path[:80]!r}: cannot be used as a path ({type(exc).__name__}: {exc})"
    if target.exists():
        if not target.is_dir():
            return f"got {path!r}: it exists and is a file, not a directory"
        if not os.access(target, os.W_OK | os.X_OK):
            return f"got {path!r}: the directory is not writable by this user"
        return None
    parent = target.absolute().parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        return f"got {path!r}: {str(parent)!r} exists and is a file, so the directory cannot be created"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"got {path!r}: cannot create it, {str(parent)!r} is not writable by this user"
    return None
