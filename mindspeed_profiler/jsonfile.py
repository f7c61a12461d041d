"""JSON files several processes write: atomically (a temp file renamed into place: readers never
see half a file), and, for read-modify-write updates such as run.json's lists, under an exclusive
lock (`.<file>.lock` beside it, flock; the empty file stays, as a lock file must) so that concurrent writers (8 triggers at once, the driver, the
process-level capture's record) never lose each other's entries. Standard library only."""
from __future__ import annotations

import contextlib
import json
import os
import secrets
from pathlib import Path
from typing import Any, Callable, Iterator

def lock_path(path: Path) -> Path:
    return path.with_name(f".{path.name}.lock")


def write_json_atomic(path: Path, obj: Any) -> Path:
    """Write JSON via a temp file + os.replace, so readers never see half a file and concurrent
    writers cannot interleave. The file gets the permissions of the other outputs (0666 less the
    umask), not mkstemp's 0600."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o666)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(obj, fh, indent=1, default=str)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
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


def read_json_object(path: Path) -> dict[str, Any] | None:
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def update_json(path: Path, change: Callable[[dict[str, Any] | None], dict[str, Any] | None]) -> Path | None:
    """Read `path` (a JSON object, or None when absent / unreadable), let `change` return the new
    object (None: write nothing), write it atomically: all under the lock."""
    path = Path(path)
    with locked(path):
        new = change(read_json_object(path))
        return write_json_atomic(path, new) if new is not None else None
