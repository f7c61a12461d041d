"""A gzip file's uncompressed bytes and size, standard library only (no numpy: the analyse command
starts inflating its one large trace before it imports the analysis, parsing/prefetch.py)."""
from __future__ import annotations

import gzip
import zlib
from pathlib import Path
from typing import BinaryIO, Iterator

from mindspeed_profiler.core.fileio import open_regular

GZIP_MAGIC = b"\x1f\x8b"
BOMB_RATIO, BOMB_MIN_BYTES = 50, 32 << 20   # a .gz expanding 50x into more than 32 MB


def expanded_size(path: Path) -> int:
    """Bytes the trace holds once decompressed: gzip's ISIZE trailer (size mod 4 GiB) for .gz, so
    that a 60 MB .gz holding 1 GB of JSON is streamed too; the file size otherwise."""
    size = path.stat().st_size
    try:
        with open_regular(path) as f:
            if f.read(2) != GZIP_MAGIC or size < 18:
                return size
            f.seek(-4, 2)
            isize = int.from_bytes(f.read(4), "little")
    except OSError:   # UnsafeFile too: a FIFO is never opened
        return size
    # ISIZE wraps above 4 GiB: a value below the compressed size means "very large"
    return isize if isize >= size else max(size * 20, 1 << 32)


def looks_like_bomb(size: int, expanded: int) -> bool:
    """A file of `size` bytes expanding into `expanded` suspiciously (a decompression bomb): it is
    parsed only in a worker whose memory is capped, never in the analysing process."""
    return expanded > BOMB_MIN_BYTES and expanded > BOMB_RATIO * max(size, 1)


def inflate(f: BinaryIO, max_out: int, raw_read: int) -> Iterator[bytes]:
    """The uncompressed bytes of gzip file `f`, at most `max_out` at a time (0: as they come), reading
    `raw_read` compressed bytes at a time, by zlib directly: one C call per piece, where
    gzip.GzipFile's Python reader costs about as much again as the inflate itself (a 53.7 MB trace:
    its parse 0.54 -> 0.41 s). Multi-member files and zero padding after a member are read as gzip
    reads them; a bad header or CRC raises gzip.BadGzipFile, a truncated file EOFError, as
    gzip.GzipFile does."""
    pending = b""   # compressed bytes read past the end of the previous member
    while True:     # one gzip member per round
        d = zlib.decompressobj(31)   # 31: a gzip header and trailer (CRC-32 and size checked)
        while not d.eof:
            data = d.unconsumed_tail or pending or f.read(raw_read)
            pending = b""
            if not data:   # (output zlib still holds is drained by the 8-byte trailer: never left here)
                raise EOFError("Compressed file ended before the end-of-stream marker was reached")
            try:
                out = d.decompress(data, max_out)
            except zlib.error as exc:
                raise gzip.BadGzipFile(f"not a valid gzip stream: {exc}") from None
            if out:
                yield out
        pending = d.unused_data.lstrip(b"\0")
        while not pending:
            more = f.read(raw_read)
            if not more:
                return
            pending = more.lstrip(b"\0")
        if len(pending) < 2:
            pending += f.read(1)
        if pending[:2] != GZIP_MAGIC:
            raise gzip.BadGzipFile(f"Not a gzipped file ({pending[:2]!r})")
