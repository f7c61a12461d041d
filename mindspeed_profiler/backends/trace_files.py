"""Writing a capture's trace files in phases: each phase timed into the capture's `export_phases`,
the raw trace checked whole, its compression done as a deferred step (the background writer runs
it: runtime/export_writer.py).

The compression level is chosen by benchmark (benchmarks/bench_capture_cost.py, docs/perf_capture.md):
gzip level 1 writes a Kineto trace ~10x faster than level 9 (torch's default) for ~1.5x the bytes, and
every reader of Kineto traces (Perfetto, TensorBoard, HTA, ours) opens gzip; zstd would need a
dependency and none of them reads it.
"""
from __future__ import annotations

import contextlib
import gzip
import os
import shutil
import time
from pathlib import Path
from typing import Callable, Iterator

from mindspeed_profiler.core import fileio

COMPRESS_LEVEL = 1
CHUNK = 1 << 20

# A deferred export step: given the capture's files so far, returns them as they are after it.
Deferred = Callable[[list[Path]], list[Path]]


class TruncatedTrace(OSError):
    """The trace file torch wrote does not end as a JSON document does (a full disk, usually)."""


@contextlib.contextmanager
def timed(phases: dict[str, float], name: str) -> Iterator[None]:
    """Add the seconds the block took to `phases[name]` (also when it raises)."""
    t0 = time.perf_counter()
    try:
        yield
    finally:
        phases[name] = round(phases.get(name, 0.0) + time.perf_counter() - t0, 6)


def check_whole_json(path: Path) -> None:
    """Raise TruncatedTrace when `path` is empty or does not end with `}` (whitespace aside):
    torch's C++ writer does not report a failed write."""
    size = path.stat().st_size
    with open(path, "rb") as fh:
        fh.seek(max(0, size - 64))
        tail = fh.read().rstrip()
    if not tail.endswith(b"}"):
        raise TruncatedTrace(f"{path.name}: the trace torch wrote is cut off at {size} bytes (disk full?)")


def gzip_file(src: Path, dst: Path, level: int | None = None) -> Path:
    """`src` compressed into `dst` (written atomically: a reader sees the whole .gz or none), then
    `src` removed. On failure `dst` is not left and `src` is kept. `level`: COMPRESS_LEVEL."""
    level = COMPRESS_LEVEL if level is None else level

    def write(fh) -> None:
        with open(src, "rb") as fin, gzip.GzipFile(filename=dst.name[:-3], mode="wb", fileobj=fh,
                                                   compresslevel=level, mtime=0) as gz:
            shutil.copyfileobj(fin, gz, CHUNK)
    fileio.write_atomic(dst, write)
    os.unlink(src)
    return dst


def compress_step(src: Path, dst: Path, level: int | None = None) -> Deferred:
    """The deferred step compressing `src` into `dst` in the capture's file list."""
    def step(files: list[Path]) -> list[Path]:
        gzip_file(src, dst, level)
        return [dst if f == src else f for f in files]
    return step
