"""The per-process recorder and the span API: real files, real threads, real asyncio."""
from __future__ import annotations

import asyncio
import os
import threading
import time

import orjson
import pytest

from mindspeed_profiler.core.state import STATE
from mindspeed_profiler.tracing import (
    trace_complete,
    flush_tracer,
    init_tracer,
    shutdown_tracer,
    trace_begin,
    trace_end,
    trace_func,
    trace_span,
)
from mindspeed_profiler.analysis.timeline.merge import build_timeline
from mindspeed_profiler.tracing.recorder import Recorder
from mindspeed_profiler.tracing.sinks import FileSink
from conftest import tracer_cfg


def _spans(save_path) -> list[dict]:
    return [e for e in build_timeline(str(save_path))["traceEvents"] if e["ph"] in ("X", "i")]


def _segment_lines(save_path) -> list:
    d = os.path.join(save_path, "timeline")
    (name,) = [n for n in os.listdir(d) if n.endswith(".seg.jsonl")]
    with open(os.path.join(d, name), "rb") as fh:
        return [orjson.loads(line) for line in fh.read().splitlines() if line.strip()]


def test_disabled_is_noop_and_creates_nothing(clean_state, tmp_path):
    cfg = {"integrated": {"profile_save_path": str(tmp_path / "p")}, "tracer": {"enable": False}}
    assert init_tracer(cfg, role="driver", rank=0) is None
    with trace_span("x"):
        pass
    assert trace_begin("y") is None
    trace_end("y")

    @trace_func
    def f():
        return 1

    assert f() == 1
    assert not (tmp_path / "p").exists()


def test_spans_nest_with_args_stage_iteration(clean_state, tmp_path):
    rec = init_tracer(tracer_cfg(tmp_path), role="ActorGroup", rank=1)
    assert STATE.tracer is rec
    STATE.stage, STATE.iteration = "actor_update", 2
    with trace_span("outer", cat="driver", args={"k": "v"}):
        with trace_span("inner"):
            time.sleep(0.001)
    with pytest.raises(RuntimeError):
        with trace_span("failing"):
            raise RuntimeError("x")
    shutdown_tracer()
    by = {e["name"]: e for e in _spans(tmp_path)}
    o, i = by["outer"], by["inner"]
    assert o["cat"] == "driver" and o["args"] == {"role": "ActorGroup", "rank": 1, "k": "v", "stage": "actor_update", "iteration": 2}
    assert o["ts"] <= i["ts"] and i["ts"] + i["dur"] <= o["ts"] + o["dur"]
    assert i["dur"] >= 1000  # slept 1 ms; dur is in microseconds
    assert by["failing"]["args"]["error"] == "RuntimeError"
    assert o["tid"] == threading.get_native_id()


def test_threads_get_real_tids_and_names(clean_state, tmp_path):
    init_tracer(tracer_cfg(tmp_path), role="r", rank=0)
    tids = {}

    def work():
        tids["worker"] = threading.get_native_id()
        with trace_span("in-thread"):
            pass

    t = threading.Thread(target=work, name="loader")
    t.start()
    t.join()
    shutdown_tracer()
    trace = build_timeline(str(tmp_path))
    ev = next(e for e in trace["traceEvents"] if e.get("name") == "in-thread")
    assert ev["tid"] == tids["worker"]
    names = {e["tid"]: e["args"]["name"] for e in trace["traceEvents"] if e["ph"] == "M" and e["name"] == "thread_name"}
    assert names[tids["worker"]] == "loader"


def test_threads_recording_while_the_flusher_takes_keep_every_span_whole(clean_state, tmp_path):
    # The buffer is a flat list of fields (recorder.py: the event layout): the flusher takes a
    # prefix while other threads add to it. Every span must come out once, with its own fields.
    init_tracer(tracer_cfg(tmp_path, flush_every_events=97, flush_interval_s=0.01), role="r", rank=0)
    n, workers = 3000, 4
    together = threading.Barrier(workers, timeout=60)  # all alive at once: no reused thread ids

    def work(w):
        together.wait()
        for i in range(n):
            with trace_span(f"w{w}-{i}", cat=f"c{w}", args={"i": i}):
                pass
        together.wait()

    threads = [threading.Thread(target=work, args=(w,), name=f"rec-{w}") for w in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    shutdown_tracer()
    trace = build_timeline(str(tmp_path))
    names = {e["tid"]: e["args"]["name"] for e in trace["traceEvents"] if e["ph"] == "M" and e["name"] == "thread_name"}
    spans = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert len(spans) == n * workers
    seen = set()
    for e in spans:
        w, i = e["name"][1:].split("-")
        assert e["cat"] == f"c{w}" and e["args"]["i"] == int(i) and names[e["tid"]] == f"rec-{w}"
        assert e["dur"] >= 0
        seen.add(e["name"])
    assert len(seen) == n * workers


def test_concurrent_coroutines_get_own_lanes(clean_state, tmp_path):
    init_tracer(tracer_cfg(tmp_path), role="rollout", rank=0)

    @trace_func(cat="gen")
    async def one(i):
        with trace_span(f"step{i}"):
            await asyncio.sleep(0.01)

    async def main():
        await asyncio.gather(*(one(i) for i in range(3)))

    asyncio.run(main())
    shutdown_tracer()
    spans = _spans(tmp_path)
    outer = [e for e in spans if e["cat"] == "gen"]
    assert len(outer) == 3 and len({e["tid"] for e in outer}) == 3  # they overlap in time: one lane each
    for e in outer:
        inner = [s for s in spans if s["tid"] == e["tid"] and s["name"].startswith("step")]
        assert len(inner) == 1 and e["ts"] <= inner[0]["ts"] <= inner[0]["ts"] + inner[0]["dur"] <= e["ts"] + e["dur"]


def test_trace_begin_end_by_name_and_handle(clean_state, tmp_path, runtime_warnings):
    init_tracer(tracer_cfg(tmp_path), role="r", rank=0)
    h = trace_begin("by-handle", cat="c")
    trace_begin("by-name")
    trace_end("by-name")
    trace_end(h)
    trace_end("never-begun")
    assert len(runtime_warnings("no matching trace_begin")) == 1
    # begun on one thread, ended on another (RLinf allows it)
    trace_begin("cross-thread")
    closer = {}

    def end_it():
        closer["tid"] = threading.get_native_id()
        trace_end("cross-thread")

    t = threading.Thread(target=end_it)
    t.start()
    t.join()
    shutdown_tracer()
    spans = _spans(tmp_path)
    assert sorted(e["name"] for e in spans) == ["by-handle", "by-name", "cross-thread"]
    # a span is on the lane that closes it (docs/tracing.md)
    assert next(e["tid"] for e in spans if e["name"] == "cross-thread") == closer["tid"] != threading.get_native_id()


def test_trace_complete_draws_a_span_another_process_timed(clean_state, tmp_path):
    """trace_complete(name, start_ns, end_ns): times of another process's time.monotonic_ns() (a
    child here: CLOCK_MONOTONIC is one clock for the host), drawn on this lane with that duration;
    a backwards span is not recorded."""
    import subprocess
    import sys

    init_tracer(tracer_cfg(tmp_path), role="rollout", rank=0)
    with trace_span("rpc"):
        out = subprocess.run([sys.executable, "-c", "import time; a = time.monotonic_ns(); time.sleep(0.05); "
                              "print(a, time.monotonic_ns())"], capture_output=True, text=True, check=True)
    start, end = map(int, out.stdout.split())
    trace_complete("weight_sync/load", start, end, cat="weight_sync", args={"phase": "load"})
    trace_complete("backwards", end, start)
    shutdown_tracer()
    spans = {e["name"]: e for e in _spans(tmp_path)}
    assert set(spans) == {"rpc", "weight_sync/load"}
    load, rpc = spans["weight_sync/load"], spans["rpc"]
    assert load["dur"] == pytest.approx((end - start) / 1e3, abs=1) and load["tid"] == rpc["tid"]
    assert rpc["ts"] <= load["ts"] and load["ts"] + load["dur"] <= rpc["ts"] + rpc["dur"]   # inside the call that made it


def test_flush_every_n_events_before_interval(clean_state, tmp_path):
    init_tracer(tracer_cfg(tmp_path, flush_every_events=10, flush_interval_s=60.0), role="r", rank=0)
    for i in range(25):
        with trace_span(f"s{i}"):
            pass
    deadline = time.time() + 5
    events = []
    while time.time() < deadline:
        events = [r for r in _segment_lines(tmp_path) if isinstance(r, list)]
        if len(events) >= 20:
            break
        time.sleep(0.02)
    assert len(events) >= 20  # flushed by count, long before the 60 s interval


def test_full_buffer_drops_and_counts(clean_state, tmp_path):
    rec = init_tracer(tracer_cfg(tmp_path, buffer_max_events=5, flush_every_events=1000, flush_interval_s=60.0), role="r", rank=0)
    for i in range(12):
        with trace_span(f"s{i}"):
            pass
    assert rec.dropped == 7
    shutdown_tracer()
    trace = build_timeline(str(tmp_path))
    assert len([e for e in trace["traceEvents"] if e["ph"] == "X"]) == 5
    assert trace["otherData"]["processes"][0]["dropped"] == 7
    assert any("dropped 7" in w for w in trace["otherData"]["warnings"])


def test_unwritable_dir_one_warning_training_continues(clean_state, tmp_path, runtime_warnings):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    cfg = {"integrated": {"profile_save_path": str(tmp_path)}, "tracer": {"enable": True, "output_dir": str(blocker / "timeline")}}
    assert init_tracer(cfg, role="r", rank=0) is None
    with trace_span("still-fine"):
        x = 1
    assert init_tracer(cfg, role="r", rank=0) is None
    ours = runtime_warnings()
    assert len(ours) == 1 and "tracing is off" in ours[0]
    assert x == 1 and STATE.tracer is None


class _FailingSink:
    """Stands in for a collector that died: every write raises (as ray.get would)."""

    def __init__(self):
        self.writes = 0

    def write(self, data):
        self.writes += 1
        raise ConnectionError("collector actor died")

    def close(self):
        pass

    def describe(self):
        return "collector:test"


def test_dead_sink_falls_back_to_local_file_with_one_warning(clean_state, tmp_path, runtime_warnings):
    rec = Recorder("r", 0, _FailingSink(), flush_interval_s=60.0, fallback_dir=str(tmp_path), start_thread=False)
    rec.add(("X", "a", "c", 1, 3, threading.get_ident(), 0, None, None, None))
    rec.flush()
    rec.add(("X", "b", "c", 3, 7, threading.get_ident(), 0, None, None, None))
    rec.close()
    assert len(runtime_warnings()) == 1
    assert isinstance(rec.sink, FileSink)
    names = [e["name"] for e in build_timeline(str(tmp_path))["traceEvents"] if e["ph"] == "X"]
    assert names == ["a", "b"]


def test_file_sink_failure_mid_run_drops_with_one_warning(clean_state, tmp_path, runtime_warnings):
    rec = init_tracer(tracer_cfg(tmp_path, flush_interval_s=60.0), role="r", rank=0)

    def broken(data):
        raise OSError(28, "No space left on device")

    rec.sink.write = broken
    for _ in range(3):
        with trace_span("x"):
            pass
        flush_tracer()
    shutdown_tracer()
    assert len(runtime_warnings()) == 1
    assert rec.dropped == 3


def test_reinit_same_role_returns_same_and_accepts_profilerconfig(clean_state, tmp_path):
    from mindspeed_profiler.config import load_config

    cfg = load_config(tracer_cfg(tmp_path))
    a = init_tracer(cfg, role="driver", rank=0)
    assert init_tracer(cfg, role="driver", rank=0) is a
    b = init_tracer(cfg, role="other", rank=0)
    assert b is not a and a._closed
    with pytest.raises(ValueError, match="rank"):
        init_tracer(cfg, role="x", rank=-1)


def test_output_dir_override(clean_state, tmp_path):
    out = tmp_path / "elsewhere"
    init_tracer(tracer_cfg(tmp_path / "save", output_dir=str(out)), role="r", rank=0)
    with trace_span("a"):
        pass
    shutdown_tracer()
    assert [e["name"] for e in build_timeline(str(out))["traceEvents"] if e["ph"] == "X"] == ["a"]
    assert not (tmp_path / "save" / "timeline").exists()
