"""Reading and writing summary.json (the analysis' own output, read back by report, compare and
RunAnalysis)."""
from __future__ import annotations

from pathlib import Path

import orjson

from mindspeed_profiler import formats
from mindspeed_profiler.fileio import write_atomic

from .rows import INT64


_OPTS = orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS


def write_summary(path: Path, summary: dict) -> None:
    """summary.json; an integer JSON cannot carry as one (beyond 64 bits, from a crafted input
    that got past its reader) becomes a float and a warning, never a lost summary."""
    try:
        data = orjson.dumps(summary, option=_OPTS)
    except TypeError:
        found: list[str] = []
        clean = _fit_ints(summary, "", found)
        clean.setdefault("warnings", []).append(
            f"{len(found)} integer(s) beyond 64 bits written as floats (first at {found[0] if found else '?'}): "
            "a crafted value in an input")
        data = orjson.dumps(clean, option=_OPTS)
    write_atomic(path, data)


def _fit_ints(v, where: str, found: list[str]):
    if isinstance(v, bool):
        return v
    if isinstance(v, int):
        if -INT64 <= v < INT64:
            return v
        found.append(where or "/")
        return float(v)
    if isinstance(v, dict):
        return {k: _fit_ints(x, f"{where}/{k}", found) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_fit_ints(x, f"{where}/{i}", found) for i, x in enumerate(v)]
    return v


def load_summary(path: Path) -> dict:
    return orjson.loads(Path(path).read_bytes())


def find_summary(p: str | Path) -> Path | None:
    """summary.json given a run directory, an analysis directory or the file itself."""
    p = Path(p)
    for cand in (p, p / formats.SUMMARY_FILE, p / formats.ANALYSIS_DIR / formats.SUMMARY_FILE):
        if cand.is_file() and cand.name == formats.SUMMARY_FILE:
            return cand
    return None
