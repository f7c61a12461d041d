"""Inside a wrapped worker: the iteration hook of IntegratedProfiler (observers.ITERATION_LISTENERS),
the iteration records, and the CUDA profiler range opened and closed exactly around each listed
step (through the seam: on this CPU machine the calls are recorded, not made)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from mindspeed_profiler import IntegratedProfiler
from mindspeed_profiler.core import formats
from mindspeed_profiler import load_config
from mindspeed_profiler.capture import observers
from mindspeed_profiler.system import worker
from mindspeed_profiler.system.spec import WorkerSpec
from conftest import REPO_ROOT


class Seam:
    """Stands for torch.cuda.profiler: remembers each call and whether the range is open."""

    def __init__(self):
        self.calls: list[str] = []
        self.open = False

    def start(self):
        assert not self.open, "cudaProfilerStart while the range is open"
        self.calls.append("start")
        self.open = True
        return "recorded"

    def stop(self):
        assert self.open, "cudaProfilerStop without an open range"
        self.calls.append("stop")
        self.open = False
        return "recorded"


class Memory:
    def __init__(self):
        self.records: list[dict] = []

    def write(self, record):
        self.records.append(record)


@pytest.fixture
def seam(monkeypatch):
    s = Seam()
    monkeypatch.setattr(worker, "PROFILER_RANGE", s)
    return s


def profiler(**integrated):
    return IntegratedProfiler(load_config({"integrated": integrated}).integrated, role="actor", rank=0, world_size=1)


def spec(tmp_path, backend="nsight", steps=(2, 4), **kw):
    return WorkerSpec(backend=backend, group="actor", rank=0, output_dir=str(tmp_path), steps=steps, run_id="r1", **kw)


def test_without_a_listener_the_hook_is_one_falsy_check(listeners, monkeypatch):
    calls = []
    monkeypatch.setattr(observers, "notify", lambda *a: calls.append(a))
    p = profiler()
    p.start()
    for _ in range(3):
        p.step()
    p.stop()
    assert calls == []


def test_the_hook_reports_every_boundary_also_with_profiling_off(listeners):
    seen = []
    listeners.append(lambda prof, event, it: seen.append((event, it)))
    p = profiler(profile=False)
    p.start()
    for _ in range(3):
        p.step()
    p.stop()
    p.stop()  # idempotent: no second "stop"
    assert seen == [("start", 1), ("step", 2), ("step", 3), ("step", 4), ("stop", 4)]


def test_a_failing_listener_never_stops_training(listeners, runtime_warnings):
    def broken(*a):
        raise RuntimeError("boom")

    listeners.append(broken)
    p = profiler()
    p.start()
    p.step()
    p.step()
    p.stop()
    assert len(runtime_warnings("iteration listener")) == 1


@pytest.mark.parametrize("backend,steps,ranged", [("nsight", (2, 4), {2, 4}), ("nsight", (1,), {1}),
                                                  ("nsight", None, set()), ("py_spy", (2, 4), set())])
def test_range_is_open_exactly_during_the_listed_iterations(tmp_path, listeners, seam, backend, steps, ranged):
    records = Memory()
    listeners.append(worker.IterationFollower(spec(tmp_path, backend, steps), records))
    p = profiler(profile=False)
    p.start()
    open_in = set()
    for it in range(1, 6):
        if seam.open:                # the work of iteration `it` happens here
            open_in.add(it)
        p.step()
    p.stop()
    assert open_in == ranged and not seam.open
    assert seam.calls == ["start", "stop"] * len(ranged)
    ranges = [(r["call"], r["iteration"]) for r in records.records if r["type"] == formats.SYS_RANGE]
    assert ranges == [(c, it) for it in sorted(ranged) for c in ("start", "stop")]
    its = [r for r in records.records if r["type"] == formats.SYS_ITERATION]
    assert [r["iteration"] for r in its] == [1, 2, 3, 4, 5, 6]
    assert {r["iteration"] for r in its if r["listed"]} == set(steps or ())
    for r in its:
        assert r["begin_wall_ns"] <= r["end_wall_ns"]
    # each range call sits inside its iteration's boundaries
    for rec in records.records:
        if rec["type"] == formats.SYS_RANGE:
            it = next(r for r in its if r["iteration"] == rec["iteration"])
            assert it["begin_wall_ns"] <= rec["wall_ns"] <= it["end_wall_ns"]


def test_colocated_profilers_share_one_range(tmp_path, listeners, seam):
    """Actor and reference in one process: each steps its own profiler; the process's iteration is the
    highest, and the range opens once per listed iteration."""
    listeners.append(worker.IterationFollower(spec(tmp_path, "nsight", (2,)), Memory()))
    a, r = profiler(), profiler()
    a.start()
    r.start()
    a.step()
    assert seam.open
    r.step()           # the reference reaches iteration 2 as well: nothing changes
    assert seam.calls == ["start"]
    a.step()
    r.step()
    a.stop()
    r.stop()
    assert seam.calls == ["start", "stop"] and not seam.open


def test_install_follows_iterations_and_writes_records(tmp_path, listeners, monkeypatch):
    s = spec(tmp_path, "nsight", (2,))
    monkeypatch.setenv(formats.SYSTEM_ENV, s.encode())
    monkeypatch.setenv(formats.SYSTEM_STATUS_ENV, json.dumps({"status": "wrapped", "tool_path": "/x/nsys"}))
    monkeypatch.setattr(worker, "_FOLLOWER", None)
    assert worker.install() is True and worker.install() is True
    assert len(listeners) == 1
    p = profiler()
    p.start()
    p.step()
    p.step()
    p.stop()
    lines = [json.loads(x) for x in s.iterations_path.read_text().splitlines()]
    assert lines[0]["type"] == formats.SYS_WORKER and lines[0]["pid"] == os.getpid() and lines[0]["run_id"] == "r1"
    assert [(x["type"], x.get("iteration")) for x in lines[1:]] == [
        ("iteration", 1), ("range", 2), ("range", 2), ("iteration", 2), ("iteration", 3)]
    assert {x["mode"] for x in lines if x["type"] == "range"} == {"recorded"}   # no CUDA here
    status = worker.worker_status()
    assert status["status"] == "wrapped" and status["following_iterations"] and status["tool"] == "nsys"
    assert status["meta"] == str(s.meta_path) and status["report"] == str(s.report_path)


def test_py_spy_worker_leaves_a_clock_mark(tmp_path, listeners, monkeypatch):
    s = spec(tmp_path, "py_spy", None, args={"rate": "200"})
    monkeypatch.setenv(formats.SYSTEM_ENV, s.encode())
    monkeypatch.setenv(formats.SYSTEM_STATUS_ENV, json.dumps({"status": "wrapped"}))
    monkeypatch.setattr(worker, "_FOLLOWER", None)
    assert worker.install()
    mark = [json.loads(x) for x in s.iterations_path.read_text().splitlines()][1]
    assert mark["type"] == formats.SYS_CLOCK and mark["function"] == formats.CLOCK_MARK_FUNCTION
    assert mark["end_wall_ns"] - mark["begin_wall_ns"] >= 100e6 and mark["rate_hz"] == 200.0   # 10 periods, >= 100 ms
    assert worker.mindspeed_profiler_clock_mark.__name__ == formats.CLOCK_MARK_FUNCTION  # what py-spy will show


def test_an_unwrapped_worker_follows_nothing(tmp_path, listeners, monkeypatch):
    s = spec(tmp_path)
    monkeypatch.setenv(formats.SYSTEM_ENV, s.encode())
    monkeypatch.setenv(formats.SYSTEM_STATUS_ENV, json.dumps({"status": "unwrapped", "reason": "nsys not found"}))
    monkeypatch.setattr(worker, "_FOLLOWER", None)
    assert worker.install() is False and listeners == []
    assert worker.worker_status()["status"] == "unwrapped" and worker.worker_status()["reason"] == "nsys not found"
    assert list(tmp_path.iterdir()) == []


def test_session_reads_the_settings_once_at_the_first_start(tmp_path):
    """A fresh interpreter: the listener is installed at the first profiler start with the settings in
    its environment, never without them; importing the runtime imports nothing of system/."""
    code = ("import sys; import mindspeed_profiler.capture.observers as s; from mindspeed_profiler import IntegratedProfiler, load_config\n"
            "assert 'mindspeed_profiler.system.worker' not in sys.modules and not s.ITERATION_LISTENERS\n"
            "p = IntegratedProfiler(load_config({'integrated': {}}).integrated, role='actor', rank=0, world_size=1)\n"
            "p.start(); p.stop(); p.start(); p.stop(); print(len(s.ITERATION_LISTENERS))")
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    env.pop(formats.SYSTEM_ENV, None)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "0", out.stderr
    env.update({formats.SYSTEM_ENV: spec(tmp_path).encode(), formats.SYSTEM_STATUS_ENV: json.dumps({"status": "wrapped"})})
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "1", out.stderr
    env[formats.SYSTEM_ENV] = "not a token"   # damaged settings: the worker runs on, unwrapped
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "0", out.stderr


def test_a_failing_cuda_profiler_call_is_recorded_and_training_goes_on(tmp_path, listeners, monkeypatch, runtime_warnings):
    class Broken:
        def start(self):
            raise RuntimeError("cudaProfilerStart: no device")

        def stop(self):
            raise AssertionError("never stopped: it never started")

    monkeypatch.setattr(worker, "PROFILER_RANGE", Broken())
    records = Memory()
    listeners.append(worker.IterationFollower(spec(tmp_path, "nsight", (2,)), records))
    p = profiler()
    p.start()
    p.step()
    p.step()
    p.stop()
    ranges = [r for r in records.records if r["type"] == formats.SYS_RANGE]
    assert [(r["call"], r["mode"][:7]) for r in ranges] == [("start", "failed:")]
    assert [r["iteration"] for r in records.records if r["type"] == formats.SYS_ITERATION] == [1, 2, 3]
    assert len(runtime_warnings("CUDA profiler start failed")) == 1
