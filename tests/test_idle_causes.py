"""Idle time by cause per device stream and kernel launch statistics (analyzers/idle_causes.py).

- HolisticTraceAnalysis 0.5.0 (the `crosscheck` extra; skipped without it, a failure where
  MSP_REQUIRE_CROSSCHECK=1), on the real Kineto traces of the HTA breakdown cross-check
  (test_crosscheck.KINETO), with ns rounding off: per stream, our host_wait / kernel_wait / other
  equal get_idle_time_breakdown()'s within 1% (HTA rounds its idle_time to 0.01 us: an absolute
  0.005 us is its rounding), the same streams; our launch statistics equal those of the rows of
  get_cuda_kernel_launch_stats().
- a hand-made trace pins each cause, the boundaries (a launch exactly at the previous end, a gap
  of exactly 30 us, an overlap), the ProfilerStep filter and each launch statistic, recomputed here.
"""
from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys

import pytest

from analysis_testutil import analyse_one, write_json
from mindspeed_profiler.analysis.analyzers.idle_causes import IDLE_CAUSES, KERNEL_LAUNCHES, stream_number
from mindspeed_profiler.analysis.results.facade import RunAnalysis
from reference_tools import need
from test_crosscheck import KINETO

# HTA's idle time breakdown and launch statistics per trace directory, as JSON on the last line
HTA_IDLE_DRIVER = """
import sys, json, logging
logging.disable(logging.WARNING)
from hta.trace_analysis import TraceAnalysis
out = {}
for d in sys.argv[1:]:
    ta = TraceAnalysis(trace_dir=d, include_last_profiler_step=True)
    rank = ta.t.get_ranks()[0]
    idle, _ = ta.get_idle_time_breakdown(ranks=[rank], visualize=False)
    launch = ta.get_cuda_kernel_launch_stats(ranks=[rank], visualize=False)[rank]
    out[d] = {"idle": idle.to_dict(orient="records"), "launch": launch.to_dict(orient="list")}
print("HTA-JSON " + json.dumps(out))
"""
HTA_ROUNDING = 0.005 + 1e-6   # HTA rounds idle_time to 2 decimals (us)


@pytest.fixture(scope="module")
def hta_idle(tmp_path_factory):
    need("hta")
    root = tmp_path_factory.mktemp("hta_idle")
    dirs = {}
    for name, (path, _) in KINETO.items():
        if path.is_file():
            (root / name).mkdir()
            shutil.copy(path, root / name / path.name)   # HTA reads every trace of a directory as a rank
            dirs[name] = root / name
    if not dirs:
        pytest.skip("none of the Kineto traces is here")
    env = dict(os.environ, HTA_DISABLE_NS_ROUNDING="1")
    p = subprocess.run([sys.executable, "-c", HTA_IDLE_DRIVER, *map(str, dirs.values())], capture_output=True,
                       text=True, timeout=600, env=env)
    assert p.returncode == 0, p.stderr[-3000:]
    line = next(ln for ln in reversed(p.stdout.splitlines()) if ln.startswith("HTA-JSON "))
    res = json.loads(line[len("HTA-JSON "):])
    return {name: res[str(d)] for name, d in dirs.items()}


@pytest.mark.parametrize("name", list(KINETO))
def test_idle_causes_equal_hta(name, hta_idle, tmp_path):
    if name not in hta_idle:
        pytest.skip(f"{KINETO[name][0]} not found")
    path = KINETO[name][0]
    shutil.copy(path, tmp_path / path.name)
    c = analyse_one(tmp_path)
    assert c["status"] == "ok", c.get("error")
    ours = {r["stream"]: r for r in c["idle_causes"]}
    ref: dict[int, dict[str, float]] = {}
    for r in hta_idle[name]["idle"]:
        ref.setdefault(int(r["stream"]), {})[r["idle_category"]] = r["idle_time"]
    assert set(ours) == set(ref), (sorted(ours), sorted(ref))
    for stream, cats in ref.items():
        o = ours[stream]
        for cause in ("host_wait", "kernel_wait", "other"):
            # HTA writes no row for a cause with no gap of its own
            assert o[f"{cause}_us"] == pytest.approx(cats.get(cause, 0.0), rel=0.01, abs=HTA_ROUNDING), \
                (name, stream, cause, o[f"{cause}_us"], cats.get(cause))
        assert o["idle_us"] == pytest.approx(o["host_wait_us"] + o["kernel_wait_us"] + o["other_us"])

    h = hta_idle[name]["launch"]
    kl = c.get("kernel_launches")
    if not h["correlation"]:   # ROCm: HIP's launch calls are none of the names HTA joins
        assert kl is None
        return
    delay, cpu, dev = h["launch_delay"], h["cpu_duration"], h["gpu_duration"]
    assert kl["n_launches"] == len(delay)
    exact = dict(rel=1e-9, abs=1e-6)
    assert kl["launch_delay_mean_us"] == pytest.approx(statistics.fmean(delay), **exact)
    assert kl["launch_delay_median_us"] == pytest.approx(statistics.median(delay), **exact)
    assert kl["launch_delay_max_us"] == pytest.approx(max(delay), **exact)
    assert kl["cpu_duration_total_us"] == pytest.approx(sum(cpu), **exact)
    assert kl["device_duration_total_us"] == pytest.approx(sum(dev), **exact)
    assert kl["n_device_shorter"] == sum(g < k for g, k in zip(dev, cpu))
    assert kl["n_long_calls"] == sum(k > 50 for k in cpu)
    assert kl["n_long_delays"] == sum(x > 100 for x in delay)


# ---------------------------------------------------------------------------- a trace made by hand

T0 = 1_700_000_000_000_000   # an absolute base, as Kineto writes


def _trace(steps: bool) -> dict:
    """Stream 7: eight kernels; stream 8: one memcpy. (corr, launch name, launch ts, launch dur,
    device cat, stream, device ts, device dur); corr 5 has no launch call in the trace."""
    rows = [
        (1, "cudaLaunchKernel", -5, 2, "kernel", 7, 0, 10),
        (2, "cudaLaunchKernel", 2, 3, "kernel", 7, 15, 10),      # gap 5, launched early: kernel wait
        (3, "cudaLaunchKernel", 80, 4, "kernel", 7, 100, 10),    # gap 75, launched after 25: host wait
        (4, "cudaLaunchKernel", 20, 2, "kernel", 7, 150, 10),    # gap 40 >= 30, launched early: other
        (5, None, None, None, "kernel", 7, 170, 5),              # gap 10, no launch: kernel wait
        (6, "cudaMemcpyAsync", 100, 60, "gpu_memcpy", 8, 165, 1),  # alone on its stream
        (7, "cudaLaunchKernel", 175, 30, "kernel", 7, 200, 5),   # gap 25, launched exactly at 175: kernel wait
        (8, "cudaLaunchKernel", 100, 1, "kernel", 7, 235, 10),   # gap exactly 30: other
        (9, "cudaLaunchKernel", 101, 1, "kernel", 7, 240, 10),   # overlap: gap -5, summed as HTA does
    ]
    ev = [{"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "GPU 0"}},
          {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": T0 - 10, "dur": 300}]
    for corr, name, lts, ldur, cat, stream, ts, dur in rows:
        if name:
            ev.append({"ph": "X", "cat": "cuda_runtime", "name": name, "pid": 1, "tid": 1, "ts": T0 + lts,
                       "dur": ldur, "args": {"correlation": corr}})
        ev.append({"ph": "X", "cat": cat, "name": f"k{corr}", "pid": 0, "tid": stream, "ts": T0 + ts, "dur": dur,
                   "args": {"correlation": corr, "stream": stream, "device": 0}})
    if steps:
        ev += [{"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{n}", "pid": 1, "tid": 1,
                "ts": T0 - 10 + 150 * n, "dur": 150} for n in (0, 1)]
    return {"traceEvents": ev}


def _rows(tmp_path, steps: bool) -> tuple[dict, dict]:
    write_json(tmp_path / "run" / "trace.pt.trace.json", _trace(steps))
    c = analyse_one(tmp_path / "run")
    return {r["stream"]: r for r in c["idle_causes"]}, c


def test_each_cause_by_hand(tmp_path):
    rows, c = _rows(tmp_path, steps=False)
    s7, s8 = rows[7], rows[8]
    assert (s7["host_wait_us"], s7["kernel_wait_us"], s7["other_us"]) == (75, 5 + 10 + 25 - 5, 40 + 30)
    assert s7["idle_us"] == 180
    assert (s7["n_host_wait"], s7["n_kernel_wait"], s7["n_other"]) == (1, 4, 2)
    assert (s7["n_activities"], s7["n_launched"], s7["device"], s7["thread"]) == (8, 7, "0", "7")
    assert (s8["n_activities"], s8["idle_us"], s8["n_host_wait"] + s8["n_kernel_wait"] + s8["n_other"]) == (1, 0, 0)

    # launch delay = device start - call end, 0 when negative (corr 7)
    delay = [0 - (-5 + 2), 15 - (2 + 3), 100 - (80 + 4), 150 - (20 + 2), 165 - (100 + 60), 0, 235 - 101, 240 - 102]
    cpu = [2, 3, 4, 2, 60, 30, 1, 1]
    dev = [10, 10, 10, 10, 1, 5, 10, 10]
    kl = c["kernel_launches"]
    assert kl["n_launches"] == 8
    assert kl["launch_delay_mean_us"] == pytest.approx(sum(delay) / 8)
    assert kl["launch_delay_median_us"] == statistics.median(delay) == 13
    assert kl["launch_delay_max_us"] == 138
    assert (kl["cpu_duration_total_us"], kl["device_duration_total_us"]) == (sum(cpu), sum(dev))
    assert kl["cpu_duration_mean_us"] == pytest.approx(sum(cpu) / 8)
    assert kl["device_duration_mean_us"] == pytest.approx(sum(dev) / 8)
    assert (kl["n_device_shorter"], kl["n_long_calls"], kl["n_long_delays"]) == (2, 1, 3)

    # the same rows through the row models (analysis.db, RunAnalysis)
    summary = {"captures": [c]}
    got = RunAnalysis.from_summary(summary).rows(IDLE_CAUSES)
    assert [(r["stream"], r["host_wait_us"]) for r in got] == [(7, 75), (8, 0)]
    assert RunAnalysis.from_summary(summary).rows(KERNEL_LAUNCHES)[0]["n_launches"] == 8


def test_with_profiler_steps_an_activity_without_its_launch_is_left_out(tmp_path):
    """HTA (two ProfilerStep ranges or more) keeps only the activities launched by a host event of
    the trace: k5 goes, so k7's gap runs from k4's end (160), and its launch (175) came after it."""
    rows, _ = _rows(tmp_path, steps=True)
    s7 = rows[7]
    assert (s7["host_wait_us"], s7["kernel_wait_us"], s7["other_us"]) == (75 + 40, 5 - 5, 40 + 30)
    assert (s7["n_activities"], s7["n_launched"]) == (7, 7)


def test_stream_numbers():
    assert [stream_number(t) for t in (7, "7", "stream 7", "stream7", "Stream 7", "x")] == [7, 7, 7, 7, None, None]


def test_a_repeated_correlation_id_gives_every_pair(tmp_path):
    """HTA's launch statistics are an inner join on the id: two calls carrying one id give two pairs."""
    ev = [{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": T0 + t,
           "dur": 2, "args": {"correlation": 1}} for t in (0, 4)]
    ev.append({"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": T0 + 10, "dur": 3,
               "args": {"correlation": 1, "stream": 7}})
    write_json(tmp_path / "run" / "trace.pt.trace.json", {"traceEvents": ev})
    kl = analyse_one(tmp_path / "run")["kernel_launches"]
    assert (kl["n_launches"], kl["launch_delay_max_us"], kl["launch_delay_median_us"]) == (2, 8, 6)
