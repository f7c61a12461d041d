"""Writing segment files: one JSON-lines file per process (the format is in formats.py and
docs/tracing.md; the reader is analysis/parsing/segments.py).

    {"type": "header", "schema": 1, "host", "pid", "role", "rank", "clock": {"wall_ns", "mono_ns"}, ...}
    {"type": "thread", "lane": 1, "tid": 4242, "name": "MainThread", "task": null}
    ["X", name, cat, start_mono_ns, dur_ns, lane, args | null]       # a complete span
    ["i", name, cat, mono_ns, 0, lane, args | null]                  # an instant (mark)
    {"type": "clock", "offset_ns", "uncertainty_ns", "rtt_ns", "reference"}
    {"type": "stats", "recorded", "dropped", "failed_writes"}
    {"type": "close"}

Records are appended in batches; a crash can leave at most one truncated last line, which the
reader skips. A header may appear again (the tracer was re-initialised in the same process): the
lines after it belong to that new session.
"""
from __future__ import annotations

import os
import socket
from typing import Any, Optional

import orjson

from mindspeed_profiler.core import formats
from mindspeed_profiler.core.jsonsafe import (  # lone surrogates as text: orjson readers refuse JSON's \udcff escape
    utf8 as _utf8,
)


def make_header(role: str, rank: int, wall_ns: int, mono_ns: int, extra: Optional[dict] = None) -> dict:
    header = {
        "type": formats.SEG_HEADER,
        "schema": formats.SEGMENT_SCHEMA,
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "role": role,
        "rank": rank,
        "clock": {"wall_ns": wall_ns, "mono_ns": mono_ns},
        "offset_ns": 0,
    }
    if extra:
        header.update(extra)
    return header


_OPTIONS = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS | orjson.OPT_APPEND_NEWLINE
_MAX_DEPTH = 32


def _default(obj: Any) -> Any:
    return repr(obj)  # user args may hold anything: never fail a flush over one value


def dumps_line(obj: Any) -> bytes:
    """One JSON line. What orjson cannot encode even with repr() for unknown types (an int beyond
    64 bits, a dict key of an odd type, nesting too deep) is replaced by its repr(), value by value,
    and a text with a lone surrogate (a non-UTF-8 file name through os.fsdecode) gets it written as
    the six characters `\\udcff`, so one value never costs the line, let alone the batch. Raises
    only when a value's own repr() raises."""
    try:
        return orjson.dumps(obj, default=_default, option=_OPTIONS)
    except (TypeError, orjson.JSONEncodeError):
        return orjson.dumps(_encodable(obj, 0), default=_default, option=_OPTIONS)


def _encodable(v: Any, depth: int) -> Any:
    if isinstance(v, str):
        return _utf8(v)
    if isinstance(v, bool) or v is None or isinstance(v, float):
        return v
    if isinstance(v, int):
        return v if -2**63 <= v < 2**64 else repr(v)
    if depth >= _MAX_DEPTH:
        return _utf8(repr(v))
    if isinstance(v, dict):
        return {_key(k): _encodable(x, depth + 1) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_encodable(x, depth + 1) for x in v]
    try:
        orjson.dumps(v, default=_default, option=_OPTIONS)
        return v
    except (TypeError, orjson.JSONEncodeError):
        return _utf8(repr(v))


def _key(k: Any) -> Any:
    """A dict key orjson takes (text, a 64-bit int, a float, a bool), else its repr()."""
    if isinstance(k, str):
        return _utf8(k)
    if isinstance(k, (int, float, bool)) and not (isinstance(k, int) and not -2**63 <= k < 2**64):
        return k
    return _utf8(repr(k))
