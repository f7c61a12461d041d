"""Markers: dispatch per backend, exception safety, domains, metrics, the off path.

What cannot run here (Ascend NPU, a CUDA build) is exercised through fakes that follow the real
signatures: torch_npu.npu.mstx from the snapshot of the torch-npu 2.14.0 wheel source
(mindspeed_profiler/data/torch_npu_signatures.json, or the copy below when absent), and
torch.cuda.nvtx's range_start(msg) -> int / range_end(range_id) / mark(msg), copied from the
installed torch (2.13) torch/cuda/nvtx.py and checked against it below. record_function on CPU is real.
"""
from __future__ import annotations

import asyncio
import inspect
import json
import sys
import types
import warnings

import pytest
import torch

from mindspeed_profiler import mstx_mark, mstx_range, mstx_timer_decorator
from mindspeed_profiler.runtime import mstx
from conftest import REPO_ROOT, tracer_cfg

SNAPSHOT = REPO_ROOT / "mindspeed_profiler" / "data" / "torch_npu_signatures.json"
# Copied from torch_npu/npu/mstx.py (torch-npu 2.14.0) in case the snapshot is missing.
_COPIED = {
    "mark": [("message", None, False), ("stream", None, True), ("domain", "default", True)],
    "range_start": [("message", None, False), ("stream", None, True), ("domain", "default", True)],
    "range_end": [("range_id", None, False), ("domain", "default", True)],
}


def _real_signature(fn_name: str) -> inspect.Signature:
    if SNAPSHOT.exists():
        params = json.loads(SNAPSHOT.read_text())["functions"][f"torch_npu.npu.mstx.{fn_name}"]["params"]
        spec = [(p["name"], p.get("default"), p["has_default"]) for p in params]
    else:
        spec = _COPIED[fn_name]
    return inspect.Signature(
        [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD, **({"default": d} if has else {})) for n, d, has in spec]
    )


class FakeMstx:
    """Records calls; every call is bound against the real torch_npu signature (a wrong call fails)."""

    def __init__(self, start_id: int = 7):
        self.calls = []
        self.start_id = start_id
        self.sigs = {n: _real_signature(n) for n in ("mark", "range_start", "range_end")}

    def _bind(self, name, args, kwargs):
        bound = self.sigs[name].bind(*args, **kwargs)
        bound.apply_defaults()
        self.calls.append((name, dict(bound.arguments)))

    def range_start(self, *a, **k):
        self._bind("range_start", a, k)
        return self.start_id

    def range_end(self, *a, **k):
        self._bind("range_end", a, k)

    def mark(self, *a, **k):
        self._bind("mark", a, k)


@pytest.fixture
def fake_npu(monkeypatch, clean_state):
    fake = FakeMstx()
    mod = types.ModuleType("torch_npu")
    mod.npu = types.SimpleNamespace(mstx=fake, is_available=lambda: True)
    monkeypatch.setitem(sys.modules, "torch_npu", mod)
    mstx.enable_markers(True, device="npu")
    return fake


class FakeNvtx:
    """torch.cuda.nvtx with the parameters of torch 2.13's torch/cuda/nvtx.py (copied from the
    installed source; test_fake_nvtx_has_the_real_signatures compares them): range_push(msg) /
    range_pop() keep one stack per thread, as NVTX does, so a pop ends the innermost open range;
    range_start(msg) -> int / range_end(range_id) end exactly the range with that id.
    `ended` lists the messages of ended ranges in the order they ended."""

    def __init__(self):
        self.calls = []
        self.ended = []
        self._stack = []
        self._open = {}
        self._next_id = 1

    def range_push(self, msg):
        self.calls.append(("push", msg))
        self._stack.append(msg)
        return len(self._stack) - 1

    def range_pop(self):
        self.calls.append(("pop",))
        self.ended.append(self._stack.pop())
        return len(self._stack)

    def range_start(self, msg) -> int:
        rid, self._next_id = self._next_id, self._next_id + 1
        self.calls.append(("start", msg))
        self._open[rid] = msg
        return rid

    def range_end(self, range_id) -> None:
        self.calls.append(("end", range_id))
        self.ended.append(self._open.pop(range_id))

    def mark(self, msg):
        self.calls.append(("mark", msg))


@pytest.fixture
def fake_nvtx(clean_state, monkeypatch):
    fake = FakeNvtx()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "nvtx", fake)
    mstx.enable_markers(True, device="cuda")
    return fake


# ------------------------------------------------------------------------------ off path


def test_off_calls_nothing_and_creates_nothing(fake_npu, tmp_path, monkeypatch):
    mstx.enable_markers(False)
    monkeypatch.chdir(tmp_path)

    @mstx_timer_decorator
    def f(x):
        return x + 1

    assert f(1) == 2
    with mstx_range("blk"):
        pass
    mstx_mark("m")
    assert fake_npu.calls == []
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------------------ NPU (fake with real signatures)


def test_npu_decorator_bare_named_and_domain(fake_npu):
    @mstx_timer_decorator
    def plain():
        return "p"

    @mstx_timer_decorator("custom")
    def named():
        return "n"

    @mstx_timer_decorator(name="gen", domain="rollout")
    def with_domain():
        return "d"

    assert (plain(), named(), with_domain()) == ("p", "n", "d")
    starts = [c[1] for c in fake_npu.calls if c[0] == "range_start"]
    assert [s["message"] for s in starts] == [plain.__qualname__, "custom", "gen"]
    assert starts[2]["domain"] == "rollout" and starts[2]["stream"] is None
    ends = [c[1] for c in fake_npu.calls if c[0] == "range_end"]
    assert [e["range_id"] for e in ends] == [7, 7, 7]
    assert ends[2]["domain"] == "rollout"


def test_npu_raising_function_closes_range_and_reraises_original(fake_npu):
    class Boom(Exception):
        pass

    err = Boom("original")

    @mstx_timer_decorator
    def bad():
        raise err

    with pytest.raises(Boom) as info:
        bad()
    assert info.value is err
    assert [c[0] for c in fake_npu.calls] == ["range_start", "range_end"]


def test_npu_async_and_method(fake_npu):
    class Worker:
        @mstx_timer_decorator
        async def generate(self, n):
            await asyncio.sleep(0)
            if n < 0:
                raise ValueError("neg")
            return n * 2

    w = Worker()
    assert asyncio.run(w.generate(3)) == 6
    with pytest.raises(ValueError, match="neg"):
        asyncio.run(w.generate(-1))
    assert inspect.iscoroutinefunction(Worker.generate)
    names = [c[1].get("message") for c in fake_npu.calls if c[0] == "range_start"]
    assert names == ["test_npu_async_and_method.<locals>.Worker.generate"] * 2
    assert [c[0] for c in fake_npu.calls].count("range_end") == 2


def test_npu_range_start_failure_means_no_end(fake_npu):
    fake_npu.start_id = 0  # torch_npu returns 0 when the range could not start
    with mstx_range("r"):
        pass
    assert [c[0] for c in fake_npu.calls] == ["range_start"]


def test_npu_stream_and_mark(fake_npu):
    stream = object()
    with mstx_range("dev", stream=stream):
        pass
    mstx_mark("here", domain="d1")
    start = fake_npu.calls[0][1]
    assert start["stream"] is stream
    assert fake_npu.calls[-1] == ("mark", {"message": "here", "stream": None, "domain": "d1"})


def test_domain_include_exclude(fake_npu):
    mstx.enable_markers(True, device="npu", domain_include=("keep",))
    for d in ("keep", "other", "default"):
        with mstx_range("x", domain=d):
            pass
    assert [c[1]["domain"] for c in fake_npu.calls if c[0] == "range_start"] == ["keep"]
    fake_npu.calls.clear()
    mstx.enable_markers(True, device="npu", domain_exclude=("noisy",))
    for d in ("noisy", "default"):
        with mstx_range("x", domain=d):
            pass
    assert [c[1]["domain"] for c in fake_npu.calls if c[0] == "range_start"] == ["default"]


def test_backend_error_never_reaches_user_code(fake_npu, runtime_warnings):
    def broken(*a, **k):
        raise RuntimeError("device gone")

    fake_npu.range_start = broken

    @mstx_timer_decorator
    def f():
        return 42

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a warnings filter set to "error" never turns it into a crash
        assert f() == 42
        assert f() == 42
    assert len(runtime_warnings("range start failed")) == 1  # reported once only


# ------------------------------------------------------------------------------ CUDA (fake nvtx), CPU (real)


def test_fake_nvtx_has_the_real_signatures():
    import torch.cuda.nvtx as real  # plain Python on CPU builds too (only the calls fail there)

    for name in ("range_push", "range_pop", "range_start", "range_end", "mark"):
        ours = inspect.signature(getattr(FakeNvtx(), name))
        assert list(ours.parameters) == list(inspect.signature(getattr(real, name)).parameters), name


def test_cuda_dispatch_uses_nvtx(fake_nvtx):
    @mstx_timer_decorator(domain="gen")
    def f():
        raise KeyError("k")

    with pytest.raises(KeyError):
        f()
    mstx_mark("m")
    assert fake_nvtx.calls == [("start", f"gen:{f.__qualname__}"), ("end", 1), ("mark", "m")]


def test_cuda_interleaved_async_ranges_end_their_own(fake_nvtx):
    """Two decorated coroutines on one event loop: `first` starts, then `second` starts, then
    `first` ends. With range_push/range_pop, first's pop would end second's range."""

    @mstx_timer_decorator(name="first")
    async def first():
        await asyncio.sleep(0)

    @mstx_timer_decorator(name="second")
    async def second():
        for _ in range(3):
            await asyncio.sleep(0)

    async def main():
        await asyncio.gather(first(), second())

    asyncio.run(main())
    assert [c for c in fake_nvtx.calls if c[0] == "start"] == [("start", "first"), ("start", "second")]
    assert fake_nvtx.ended == ["first", "second"]


def test_cuda_on_cpu_build_warns_once_and_runs(clean_state, runtime_warnings):
    assert not torch.cuda.is_available()
    mstx.enable_markers(True, device="cuda")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with mstx_range("a"):
            pass
        with mstx_range("b"):
            pass
    assert len(runtime_warnings("nvtx markers unavailable")) == 1


def test_cpu_record_function_only_while_capturing(clean_state):
    mstx.enable_markers(True, device="cpu")

    @mstx_timer_decorator(name="marked_step")
    def step(x):
        return (x @ x).sum()

    x = torch.ones(8, 8)
    step(x)  # no capture: nothing to record into, nothing fails
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        clean_state.capture_active = True
        step(x)
        with mstx_range("block"):
            torch.relu(x)
        clean_state.capture_active = False
    names = [e.name for e in prof.events()]
    assert "marked_step" in names and "block" in names
    # nesting: aten::matmul ran inside marked_step
    rf = next(e for e in prof.events() if e.name == "marked_step")
    mm = next(e for e in prof.events() if e.name == "aten::matmul")
    assert rf.time_range.start <= mm.time_range.start and mm.time_range.end <= rf.time_range.end


# ------------------------------------------------------------------------------ metrics, tracer, validation


def test_metrics_per_name(clean_state):
    mstx.enable_marker_metrics(True)

    @mstx_timer_decorator(name="a")
    def a():
        pass

    for _ in range(3):
        a()
    with pytest.raises(ZeroDivisionError):
        with mstx_range("b"):
            1 / 0
    m = mstx.pop_marker_metrics()
    assert m["a"]["count"] == 3 and m["b"]["count"] == 1
    assert m["a"]["max_s"] <= m["a"]["total_s"]
    assert mstx.pop_marker_metrics() == {}


def test_markers_emit_tracer_spans(clean_state, tmp_path):
    from mindspeed_profiler.tracing import init_tracer, shutdown_tracer
    from mindspeed_profiler.analysis.timeline.merge import build_timeline

    init_tracer(tracer_cfg(tmp_path), role="driver", rank=0)

    @mstx_timer_decorator(domain="rollout")
    def gen():
        with mstx_range("inner"):
            mstx_mark("tick")

    clean_state.stage, clean_state.iteration = "actor_generate", 3
    gen()
    shutdown_tracer()
    evs = [e for e in build_timeline(str(tmp_path))["traceEvents"] if e["ph"] != "M"]
    by = {e["name"]: e for e in evs}
    assert by[gen.__qualname__]["cat"] == "mstx" and by[gen.__qualname__]["args"]["domain"] == "rollout"
    assert by["inner"]["args"]["stage"] == "actor_generate" and by["inner"]["args"]["iteration"] == 3
    assert by["tick"]["ph"] == "i"
    outer, inner = by[gen.__qualname__], by["inner"]
    assert outer["ts"] <= inner["ts"] and inner["ts"] + inner["dur"] <= outer["ts"] + outer["dur"]


def test_enable_markers_validates(clean_state):
    with pytest.raises(ValueError, match="device='gpu'"):
        mstx.enable_markers(True, device="gpu")
    with pytest.raises(ValueError, match="domain_include"):
        mstx.enable_markers(True, domain_include="default")
    mstx.enable_markers(True, device="cpu", domain_exclude=["x"])
    assert clean_state.mstx_enabled and clean_state.device == "cpu" and clean_state.mstx_domain_exclude == ("x",)


def test_domain_rule_matches_torch_npu():
    assert mstx.domain_selected("a", ("a",), ("a",))  # include wins
    assert not mstx.domain_selected("b", ("a",), ())
    assert not mstx.domain_selected("a", (), ("a",))
    assert mstx.domain_selected("default", (), ())
