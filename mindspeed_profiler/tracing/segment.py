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

from mindspeed_profiler import formats


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


def _default(obj: Any) -> Any:
    return repr(obj)  # user args may hold anything: never fail a flush over one value


def dumps_line(obj: Any) -> bytes:
    return orjson.dumps(obj, default=_default, option=orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_APPEND_NEWLINE)
