"""Reading files that someone else may have put there (a run directory is writable by the people who
trigger captures and by whatever copied files into it): never block on a FIFO or a device, never read
without a bound, and where asked never follow a link. Standard library only: the runtime (on-demand
requests, worker states) and the analysis (reports, metadata) both use it."""
from __future__ import annotations

import os
import stat
from pathlib import Path


class UnsafeFile(ValueError):
    """Not a regular file, too large, or a link where none is allowed; str() says which."""


def read_regular_file(path: str | os.PathLike, max_bytes: int, follow_links: bool = True) -> bytes:
    """The bytes of a regular file of at most `max_bytes`. Opened without blocking (a FIFO or a
    device is refused, never waited on) and, with follow_links=False, without following a link at
    the last component. Raises OSError (missing, unreadable) or UnsafeFile."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    if not follow_links:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if not follow_links and os.path.islink(path):
            raise UnsafeFile(f"{Path(path).name}: a symbolic link, not followed here") from None
        raise exc
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UnsafeFile(f"{Path(path).name}: not a regular file (a FIFO, a device or a directory)")
        if st.st_size > max_bytes:
            raise UnsafeFile(f"{Path(path).name}: {st.st_size} bytes, more than the {max_bytes} read here")
        chunks, left = [], max_bytes + 1
        while left > 0:
            b = os.read(fd, min(left, 1 << 20))
            if not b:
                break
            chunks.append(b)
            left -= len(b)
        data = b"".join(chunks)
    finally:
        os.close(fd)
    if len(data) > max_bytes:   # grew while being read
        raise UnsafeFile(f"{Path(path).name}: more than the {max_bytes} bytes read here")
    return data
