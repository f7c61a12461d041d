"""Reading and writing summary.json (the analysis' own output, read back by report, compare and
RunAnalysis)."""
from __future__ import annotations

import os
from pathlib import Path

import orjson

from mindspeed_profiler import formats


def write_atomic(path: Path, data: bytes) -> Path:
    """Write `data` to a temporary file beside `path` and rename it into place: a full disk or a
    crash leaves the previous file, never half of a new one."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            tmp.unlink()
        except OSError:
            pass
        raise
    return path


def write_summary(path: Path, summary: dict) -> None:
    write_atomic(path, orjson.dumps(summary, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY
                                    | orjson.OPT_NON_STR_KEYS))


def load_summary(path: Path) -> dict:
    return orjson.loads(Path(path).read_bytes())


def find_summary(p: str | Path) -> Path | None:
    """summary.json given a run directory, an analysis directory or the file itself."""
    p = Path(p)
    for cand in (p, p / formats.SUMMARY_FILE, p / formats.ANALYSIS_DIR / formats.SUMMARY_FILE):
        if cand.is_file() and cand.name == formats.SUMMARY_FILE:
            return cand
    return None
