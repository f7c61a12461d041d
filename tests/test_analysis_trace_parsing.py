"""Reading odd-but-valid traces: begin/end pairs, string and NaN timestamps, a gzip holding a large
JSON (streamed), an Ascend kernel_details.csv row without a duration. Each expected figure is worked
out by hand in the comment next to it."""
from __future__ import annotations

import gzip
import json

from analysis_testutil import analyse_one, write_json
from mindspeed_profiler.analysis.parsing import jsonscan


def test_begin_end_pairs_are_complete_events(tmp_path):
    # one thread: outer B@0..E@100 holds inner B@10..E@40; an E with no B is counted as bad
    ev = [{"ph": "B", "name": "outer", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": 0},
          {"ph": "B", "name": "inner", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": 10},
          {"ph": "E", "pid": 1, "tid": 1, "ts": 40},
          {"ph": "E", "pid": 1, "tid": 1, "ts": 100},
          {"ph": "E", "pid": 1, "tid": 2, "ts": 5}]
    c = analyse_one(write_json(tmp_path / "be.json", {"traceEvents": ev}).parent)
    assert c["status"] == "ok", c.get("error")
    ops = {o["name"]: o for o in c["top_ops"]}
    assert (ops["outer"]["total_us"], ops["outer"]["self_us"]) == (100.0, 70.0)   # 100 - 30
    assert (ops["inner"]["total_us"], ops["inner"]["self_us"]) == (30.0, 30.0)
    assert c["wall_us"] == 100.0 and c["n_bad_events"] == 1


def test_string_timestamps_with_sign_and_exponent(tmp_path):
    # "-12.5" is -12.5 (not -12 + 0.5), "1.0e1" is 10; wall = (10 + 5) - (-12.5) = 27.5
    ev = [{"ph": "X", "name": "a", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": "-12.5", "dur": 2.5},
          {"ph": "X", "name": "b", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": "1.0e1", "dur": 5}]
    c = analyse_one(write_json(tmp_path / "s.json", {"traceEvents": ev}).parent)
    assert c["status"] == "ok" and c["start_us"] == -12.5 and c["wall_us"] == 27.5


def test_nan_timestamps_written_by_python_json(tmp_path):
    # json.dumps writes NaN (not JSON, but real writers produce it): that event is bad, the rest counts
    ev = [{"ph": "X", "name": "a", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": float("nan"), "dur": 1},
          {"ph": "X", "name": "b", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": 100, "dur": 7}]
    c = analyse_one(write_json(tmp_path / "n.json", {"traceEvents": ev}).parent)
    assert c["status"] == "ok", c.get("error")
    assert (c["n_bad_events"], c["n_complete_events"], c["wall_us"]) == (1, 1, 7.0)


def test_gzip_holding_a_large_json_is_streamed(tmp_path, monkeypatch):
    # the threshold is on the JSON size, not the (10x smaller) .gz size
    ev = [{"ph": "X", "name": f"op{i % 7}", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": i * 10, "dur": 5}
          for i in range(40000)]
    p = tmp_path / "t.json.gz"
    p.write_bytes(gzip.compress(json.dumps({"traceEvents": ev}).encode()))
    raw_size = len(json.dumps({"traceEvents": ev}))
    assert p.stat().st_size < raw_size // 5
    monkeypatch.setattr(jsonscan, "STREAM_THRESHOLD", p.stat().st_size + 1)   # below the JSON size
    monkeypatch.setattr(jsonscan, "CHUNK", 1 << 16)
    calls = []
    real = jsonscan._stream
    monkeypatch.setattr(jsonscan, "_stream", lambda path, cb: calls.append(path) or real(path, cb))
    got: list = []
    jsonscan.load_trace(p, got.extend)
    assert calls == [p] and got == ev


def test_kernel_details_blank_duration_is_not_nan(tmp_path):
    d = tmp_path / "ASCEND_PROFILER_OUTPUT"
    d.mkdir()
    # kernels [0, 10] and [20, 25]; the row without a duration is counted, not summed: busy = 15
    (d / "kernel_details.csv").write_text(
        "Name,Type,Accelerator Core,Start Time(us),Duration(us)\n"
        "MatMul,MatMul,AI_CORE,\"1000.0\t\",10\n"
        "Add,Add,AI_VECTOR_CORE,\"1020.0\t\",5\n"
        "Cast,Cast,AI_VECTOR_CORE,\"1030.0\t\",\n")
    c = analyse_one(tmp_path)
    assert c["status"] == "ok" and c["device"]["busy_us"] == 15.0 and c["device"]["window_us"] == 25.0
    assert c["n_bad_kernels"] == 1
