"""The training side under hostile input (issue 31, items 1, 2 and 18): a FIFO or a link where the
metrics file goes, a span text that UTF-8 cannot hold, a count that is an integer of another type.
Training is never hurt, and nothing else is lost."""
from __future__ import annotations

import glob
import os
import threading

import numpy as np
import pytest

from conftest import tracer_cfg
from mindspeed_profiler import IntegratedProfiler, load_config
from mindspeed_profiler.analysis.merge import build_timeline
from mindspeed_profiler.analysis.parsing.segments import read_segment
from mindspeed_profiler.tracing import init_tracer, shutdown_tracer, trace_span

# ------------------------------------------------------------------------------ 2. spans with lone surrogates

NAME = os.fsdecode(b"ckpt_\xff.pt")          # a non-UTF-8 file name, as Python decodes it: 'ckpt_\udcff.pt'


def _segment_sessions(tmp_path):
    (path,) = glob.glob(str(tmp_path / "timeline" / "*.seg.jsonl"))
    seg = read_segment(path)
    assert not seg.problems, seg.problems
    (session,) = seg.sessions
    return session


def test_a_lone_surrogate_in_a_span_never_loses_the_batch(clean_state, tmp_path, runtime_warnings):
    init_tracer(tracer_cfg(tmp_path, flush_interval_s=60.0), role="r", rank=0)   # one flush: at the end
    with trace_span("before", cat="stage"):
        pass
    with trace_span(NAME, cat="stage"):
        pass
    with trace_span("in_cat", cat="io\udcff"):
        pass
    with trace_span("in_args", cat="stage", args={"file": NAME, NAME: 1, "nested": [{"f": NAME}]}):
        pass
    with trace_span("after", cat="stage"):
        pass
    shutdown_tracer()
    session = _segment_sessions(tmp_path)
    names = [e[1] for e in session.events]
    assert names == ["before", "ckpt_\\udcff.pt", "in_cat", "in_args", "after"]   # the escape, as text
    assert session.events[2][2] == "io\\udcff"
    assert session.events[3][6]["file"] == "ckpt_\\udcff.pt" and session.events[3][6]["ckpt_\\udcff.pt"] == 1
    assert session.events[3][6]["nested"] == [{"f": "ckpt_\\udcff.pt"}]
    assert session.stats == {"type": "stats", "recorded": 5, "dropped": 0, "failed_writes": 0}
    merged = [e["name"] for e in build_timeline(str(tmp_path / "timeline"))["traceEvents"] if e.get("ph") == "X"]
    assert {"before", "ckpt_\\udcff.pt", "in_cat", "in_args", "after"} <= set(merged)
    assert not runtime_warnings("tracer")


class _Unprintable:
    def __repr__(self) -> str:
        raise RuntimeError("repr refused")


def test_an_event_that_cannot_be_encoded_is_dropped_alone_and_counted(clean_state, tmp_path, runtime_warnings):
    init_tracer(tracer_cfg(tmp_path, flush_interval_s=60.0), role="r", rank=0)
    for i in range(3):
        with trace_span(f"good{i}", cat="stage"):
            pass
        with trace_span("bad", cat="stage", args={"x": _Unprintable()}):
            pass
    shutdown_tracer()
    session = _segment_sessions(tmp_path)
    assert [e[1] for e in session.events] == ["good0", "good1", "good2"]
    assert session.stats == {"type": "stats", "recorded": 3, "dropped": 3, "failed_writes": 0}   # honest
    (msg,) = runtime_warnings("could not be written")
    assert "'bad'" in msg and "repr refused" in msg and "dropped and counted" in msg
