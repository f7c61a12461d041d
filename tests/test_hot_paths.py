"""Behaviour of the fast paths (no timings here: benchmarks/bench_markers.py, bench_tracer.py).

- a marked call with everything off goes straight through the wrapper's two-flag check;
- SWITCH (the flag for "tracer or marker metrics on") follows every way they are turned on / off;
- a span recorded on the hot path (the closed Span itself in the buffer, read by the flusher)
  gives the same segment line as the event tuple `Recorder.add` takes;
- the single-comparison buffer check keeps the drop / early-flush rules.
"""
from __future__ import annotations

import asyncio
import functools
import inspect
import os
import threading

import orjson
import pytest

from mindspeed_profiler.runtime import mstx
from mindspeed_profiler import mstx_timer_decorator
from mindspeed_profiler.tracing import api, init_tracer, shutdown_tracer, trace_begin, trace_end, trace_func, trace_span
from mindspeed_profiler.core.state import SWITCH
from mindspeed_profiler.tracing.marker_metrics import METRICS
from mindspeed_profiler.tracing.wrap import wrap_callable
from mindspeed_profiler.tracing.recorder import Recorder
from conftest import tracer_cfg


class _Boom(Exception):
    pass


def _both(f):
    return [mstx_timer_decorator(f), trace_func(f)]


# ------------------------------------------------------------------------------ the off path


def test_off_path_returns_passes_arguments_and_raises_unchanged(clean_state):
    def f(a, b=2, *rest, c=3, **kw):
        """doc"""
        if a == "raise":
            raise _Boom(b)
        return (a, b, rest, c, kw)

    for wrapped in _both(f):
        assert wrapped(1) == (1, 2, (), 3, {})
        assert wrapped(1, 5, 6, c=7, d=8) == (1, 5, (6,), 7, {"d": 8})
        assert wrapped(a=1, b=4) == (1, 4, (), 3, {})
        with pytest.raises(_Boom) as info:
            wrapped("raise", "why")
        assert info.value.args == ("why",)
        with pytest.raises(TypeError):
            wrapped()  # a wrong call fails as the function's own would
        assert wrapped.__name__ == "f" and wrapped.__doc__ == "doc" and wrapped.__wrapped__ is f
        assert wrapped.__qualname__ == f.__qualname__
        assert inspect.signature(wrapped) == inspect.signature(f)


def test_off_path_generators_async_and_methods(clean_state):
    def gen(n):
        got = yield from range(n)
        return got

    async def coro(x):
        await asyncio.sleep(0)
        return x * 2

    async def agen(n):
        for i in range(n):
            yield i

    class C:
        @mstx_timer_decorator
        def m(self, x):
            return (self, x)

        @trace_func
        @staticmethod
        def s(x):
            return x

    for g in _both(gen):
        assert inspect.isgeneratorfunction(g) and list(g(3)) == [0, 1, 2]
    for c in _both(coro):
        assert inspect.iscoroutinefunction(c) and asyncio.run(c(4)) == 8
    for a in _both(agen):
        async def collect(a=a):
            return [x async for x in a(3)]

        assert asyncio.run(collect()) == [0, 1, 2]
    obj = C()
    assert obj.m(1) == (obj, 1) and C.s(5) == 5


# ------------------------------------------------------------------------------ SWITCH


def test_switch_follows_tracer_and_metrics(clean_state, tmp_path):
    assert SWITCH.on is False
    mstx.enable_marker_metrics(True)
    assert SWITCH.on is True
    mstx.enable_marker_metrics(False)
    assert SWITCH.on is False
    METRICS.on = True  # a direct write (the test fixtures do it) keeps it in step too
    assert SWITCH.on is True and METRICS.on is True
    METRICS.on = False
    init_tracer(tracer_cfg(tmp_path), role="r", rank=0)
    assert SWITCH.on is True
    mstx.enable_marker_metrics(True)
    mstx.enable_marker_metrics(False)
    assert SWITCH.on is True  # the tracer is still on
    shutdown_tracer()
    assert SWITCH.on is False


def test_switch_follows_the_device_markers(clean_state, tmp_path):
    # SWITCH.on is the wrappers' one flag: device markers count too, however they are turned on
    mstx.enable_markers(True, device="cpu")
    assert SWITCH.on is True and SWITCH.recording is False
    init_tracer(tracer_cfg(tmp_path), role="r", rank=0)
    mstx.enable_markers(False)
    assert SWITCH.on is True and SWITCH.recording is True  # the tracer is still on
    shutdown_tracer()
    assert SWITCH.on is False
    clean_state.mstx_enabled = True   # a direct write (the profiler session's) keeps it in step too
    assert SWITCH.on is True
    asked = []
    f = wrap_callable(lambda: None, lambda: asked.append(1))   # make_cm is asked only on the on path
    f()
    clean_state.mstx_enabled = False
    assert SWITCH.on is False
    f()
    assert asked == [1]


def test_after_fork_child_turns_switch_off(clean_state, tmp_path):
    rec = init_tracer(tracer_cfg(tmp_path), role="r", rank=0)
    api._after_fork_in_child()   # called here, in the parent: the recorder's flusher is still alive
    try:
        assert SWITCH.on is False
    finally:
        rec.close()   # what a real child never has to do; else its thread outlives the test
        shutdown_tracer()


def test_marked_calls_take_the_slow_path_once_something_is_on(clean_state, tmp_path):
    @mstx_timer_decorator
    def f(x):
        return x

    f(1)
    assert mstx.pop_marker_metrics() == {}
    mstx.enable_marker_metrics(True)
    assert f(x=2) == 2
    assert mstx.pop_marker_metrics()[f.__qualname__]["count"] == 1


# ------------------------------------------------------------------------------ spans on the hot path


def _segment(path) -> list:
    d = os.path.join(path, "timeline")
    (name,) = [n for n in os.listdir(d) if n.endswith(".seg.jsonl")]
    with open(os.path.join(d, name), "rb") as fh:
        return [orjson.loads(line) for line in fh.read().splitlines() if line.strip()]


def _events(path) -> list:
    return [r for r in _segment(path) if isinstance(r, list)]


class _Clock:
    """Stands in for time.monotonic_ns in api.py: 1000, 2000, 3000, ..."""

    def __init__(self):
        self.t = 0

    def __call__(self):
        self.t += 1000
        return self.t


def test_hot_path_span_writes_the_same_line_as_an_event_tuple(clean_state, tmp_path, monkeypatch):
    monkeypatch.setattr(api, "_monotonic_ns", _Clock())
    rec = init_tracer(tracer_cfg(tmp_path, flush_interval_s=60.0), role="r", rank=0)
    clean_state.stage, clean_state.iteration = "actor_update", 4
    args = {"k": "v"}
    with trace_span("outer", cat="driver", args=args):        # start 1000
        with pytest.raises(_Boom):
            with trace_span("failing"):                         # 2000 .. 3000
                raise _Boom()
    # end 4000; the same spans as events in the layout Recorder.add takes (start and end)
    ident = threading.get_ident()
    rec.add(("X", "failing", "user", 2000, 3000, ident, 0, {"error": "_Boom"}, "actor_update", 4))
    rec.add(("X", "outer", "driver", 1000, 4000, ident, 0, {"k": "v"}, "actor_update", 4))
    shutdown_tracer()
    evs = _events(tmp_path)
    assert evs[0] == ["X", "failing", "user", 2000, 1000, 1, {"error": "_Boom", "stage": "actor_update", "iteration": 4}]
    assert evs[1] == ["X", "outer", "driver", 1000, 3000, 1, {"k": "v", "stage": "actor_update", "iteration": 4}]
    assert evs[2:] == evs[:2]
    assert args == {"k": "v"}  # the caller's args are never written into


def test_decorated_spans_on_the_hot_path(clean_state, tmp_path, monkeypatch):
    monkeypatch.setattr(api, "_monotonic_ns", _Clock())
    init_tracer(tracer_cfg(tmp_path, flush_interval_s=60.0), role="r", rank=0)

    @mstx_timer_decorator(domain="rollout")
    def marked(x):
        return x + 1

    @trace_func("named", cat="worker")
    def traced(x):
        raise _Boom(x)

    assert marked(1) == 2 and marked(x=2) == 3
    with pytest.raises(_Boom) as info:
        traced(7)
    assert info.value.args == (7,)
    assert info.traceback[-1].name == "traced"  # the function's own frame: raised unchanged
    clean_state.mstx_domain_exclude = ("rollout",)
    assert marked(3) == 4  # filtered out: no span
    shutdown_tracer()
    evs = _events(tmp_path)
    assert [e[:5] for e in evs] == [["X", marked.__qualname__, "mstx", 1000, 1000], ["X", marked.__qualname__, "mstx", 3000, 1000],
                                    ["X", "named", "worker", 5000, 1000]]
    assert [e[6] for e in evs] == [{"domain": "rollout"}, {"domain": "rollout"}, {"error": "_Boom"}]


def test_a_closed_span_records_once_and_is_not_changed(clean_state, tmp_path, monkeypatch):
    monkeypatch.setattr(api, "_monotonic_ns", _Clock())
    init_tracer(tracer_cfg(tmp_path, flush_interval_s=60.0), role="r", rank=0)
    s = trace_span("once")
    with s:
        pass
    assert s.done
    s.__exit__(None, None, None)   # closing twice: nothing more
    with s:                        # reopening a closed span: nothing, and its times stay
        pass
    dropped = trace_span("dropped")
    dropped.__enter__()
    dropped.done = True            # what the profiler does with an iteration that saw no stage
    dropped.__exit__(None, None, None)
    h = trace_begin("handle")
    assert h.opened_on == (threading.get_ident(), 0) and not h.done
    trace_end(h)
    shutdown_tracer()
    evs = _events(tmp_path)
    assert [e[1] for e in evs] == ["once", "handle"]
    assert evs[0][3:5] == [1000, 1000] and evs[1][4] == 1000


def test_threads_and_tasks_on_the_hot_path(clean_state, tmp_path):
    rec = init_tracer(tracer_cfg(tmp_path, flush_interval_s=60.0), role="r", rank=0)

    all_started = threading.Barrier(3)

    def work():
        all_started.wait()  # alive together: three distinct thread idents
        with trace_span("t"):
            pass

    threads = [threading.Thread(target=work, name=f"w{i}") for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    async def task(i):
        with trace_span(f"a{i}"):
            await asyncio.sleep(0.01)

    async def main():
        await asyncio.gather(*(task(i) for i in range(2)))

    asyncio.run(main())
    assert rec.lane()[0] == threading.get_ident()
    shutdown_tracer()
    lines = _segment(tmp_path)
    names = sorted(r["name"] for r in lines if isinstance(r, dict) and r.get("type") == "thread")
    assert names == ["MainThread", "MainThread", "w0", "w1", "w2"]
    tasks = [r["task"] for r in lines if isinstance(r, dict) and r.get("type") == "thread" and r["task"]]
    assert len(set(tasks)) == 2 and all(t.startswith("Task-") for t in tasks)
    assert len({e[5] for e in lines if isinstance(e, list)}) == 5  # 3 threads + 2 task lanes


# ------------------------------------------------------------------------------ buffer limits


class _Sink:
    def __init__(self):
        self.data = b""

    def write(self, data):
        self.data += data

    def close(self):
        pass


def test_one_comparison_keeps_drop_and_early_flush_rules(clean_state):
    rec = Recorder("r", 0, _Sink(), flush_every=3, buffer_max=5, start_thread=False)
    spans = functools.partial(api.new_span, rec)
    for i in range(2):
        with spans(f"s{i}", "c", None):
            pass
    assert not rec._kicked and rec.buffered == 2
    with spans("s2", "c", None):
        pass
    assert rec._kicked and rec._wake.is_set()  # reached flush_every: the flusher is woken
    for i in range(3, 8):
        with spans(f"s{i}", "c", None):
            pass
    assert rec.buffered == 5 and rec.dropped == 3  # full: new spans dropped and counted
    rec.flush()
    assert not rec._kicked and rec.buffered == 0
    rec.add(("X", "t", "c", 1, 3, threading.get_ident(), 0, None, None, None))
    assert rec.buffered == 1 and rec.dropped == 3
    with pytest.raises(ValueError, match="has 10 fields"):   # a short event would shift the flat buffer
        rec.add(("X", "short", "c", 1, 3))
    assert rec.buffered == 1
    rec.close()
    events = [orjson.loads(x) for x in rec.sink.data.splitlines() if x.startswith(b"[")]
    assert [e[1] for e in events] == ["s0", "s1", "s2", "s3", "s4", "t"]
    stats = [orjson.loads(x) for x in rec.sink.data.splitlines() if b'"stats"' in x]
    assert stats[-1]["recorded"] == 6 and stats[-1]["dropped"] == 3
