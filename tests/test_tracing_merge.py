"""Merge: clock alignment, process/thread metadata, ordering, partial data, CLI; the offset estimator."""
from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mindspeed_profiler.cli import main as cli_main
from mindspeed_profiler.tracing.clock import estimate_offset, measure_offset
from mindspeed_profiler.analysis.timeline.merge import build_timeline, read_timeline_file as load_timeline, write_timeline


def _write_segment(d, name, header, lines):
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as fh:
        for rec in [header, *lines]:
            fh.write(orjson.dumps(rec) + b"\n")


def _header(role, rank, pid, wall_ns, mono_ns, host="h1"):
    return {"type": "header", "schema": 1, "host": host, "pid": pid, "role": role, "rank": rank, "clock": {"wall_ns": wall_ns, "mono_ns": mono_ns}, "offset_ns": 0}


T0 = 1_700_000_000_000_000_000


def _two_process_dir(tmp_path):
    d = tmp_path / "timeline"
    # driver: anchor wall T0 at mono 1000; rpc span from +1 ms to +9 ms
    _write_segment(d, "driver_rank0_h1_10.seg.jsonl", _header("driver", 0, 10, T0, 1000), [
        {"type": "thread", "lane": 1, "tid": 10, "name": "MainThread", "task": None},
        ["X", "call_worker", "rpc", 1000 + 1_000_000, 8_000_000, 1, None],
    ])
    # worker: its wall clock runs 5 s ahead; offset -5 s recorded by the sync; span from +2 ms to +7 ms
    skew = 5_000_000_000
    _write_segment(d, "ActorGroup_rank0_h2_20.seg.jsonl", _header("ActorGroup", 0, 20, T0 + skew, 50, host="h2"), [
        {"type": "thread", "lane": 1, "tid": 20, "name": "MainThread", "task": None},
        ["X", "work", "user", 50 + 2_000_000, 5_000_000, 1, {"n": 1}],
        {"type": "clock", "offset_ns": -skew, "uncertainty_ns": 1000, "rtt_ns": 2000, "reference": "driver"},
        {"type": "stats", "recorded": 1, "dropped": 0, "failed_writes": 0},
        {"type": "close"},
    ])
    return d


def test_alignment_metadata_and_order(tmp_path):
    trace = build_timeline(str(_two_process_dir(tmp_path)))
    meta = [e for e in trace["traceEvents"] if e["ph"] == "M"]
    names = {e["pid"]: e["args"]["name"] for e in meta if e["name"] == "process_name"}
    assert names == {1: "driver", 2: "ActorGroup:0"}
    sort = {e["pid"]: e["args"]["sort_index"] for e in meta if e["name"] == "process_sort_index"}
    assert sort == {1: 0, 2: 1}
    spans = {e["name"]: e for e in trace["traceEvents"] if e["ph"] == "X"}
    rpc, work = spans["call_worker"], spans["work"]
    assert all(isinstance(e[k], int) for e in trace["traceEvents"] for k in ("pid", "tid"))
    assert rpc["ts"] == 0.0 and rpc["dur"] == 8000.0
    assert work["ts"] == pytest.approx(1000.0) and work["dur"] == 5000.0  # 2 ms after anchor vs rpc's 1 ms
    assert work["args"] == {"role": "ActorGroup", "rank": 0, "n": 1}
    assert trace["otherData"]["time_origin_unix_ns"] == T0 + 1_000_000
    procs = {p["name"]: p for p in trace["otherData"]["processes"]}
    assert procs["ActorGroup:0"]["synced"] and procs["ActorGroup:0"]["closed"]
    assert not procs["driver"]["closed"]
    ts = [e["ts"] for e in trace["traceEvents"] if e["ph"] != "M"]
    assert ts == sorted(ts)


def test_truncated_last_line_is_skipped_and_reported(tmp_path):
    d = _two_process_dir(tmp_path)
    with open(d / "driver_rank0_h1_10.seg.jsonl", "ab") as fh:
        fh.write(b'["X","half-writ')
    trace = build_timeline(str(d))
    assert {e["name"] for e in trace["traceEvents"] if e["ph"] == "X"} == {"call_worker", "work"}
    assert any("truncated" in w for w in trace["otherData"]["warnings"])


def test_crossing_begin_end_spans_move_to_overlap_lane(tmp_path):
    d = tmp_path / "timeline"
    _write_segment(d, "r_rank0_h_1.seg.jsonl", _header("r", 0, 1, T0, 0), [
        {"type": "thread", "lane": 1, "tid": 1, "name": "MainThread", "task": None},
        ["X", "a", "user", 0, 100, 1, None],
        ["X", "b", "user", 50, 100, 1, None],  # crosses a
        ["X", "c", "user", 10, 20, 1, None],  # nests in a
    ])
    trace = build_timeline(str(d))
    tids = {e["name"]: e["tid"] for e in trace["traceEvents"] if e["ph"] == "X"}
    assert tids["a"] == tids["c"] == 1 and tids["b"] != 1
    assert any(e["ph"] == "M" and e["tid"] == tids["b"] and "overlap" in e["args"]["name"] for e in trace["traceEvents"])


def test_duplicate_role_rank_get_distinct_names(tmp_path):
    d = tmp_path / "timeline"
    for pid in (5, 6):  # a restarted worker
        _write_segment(d, f"w_rank0_h_{pid}.seg.jsonl", _header("w", 0, pid, T0, 0), [["X", "s", "u", 0, 1, 1, None]])
    names = sorted(e["args"]["name"] for e in build_timeline(str(d))["traceEvents"] if e.get("name") == "process_name")
    assert names == ["w:0 (pid 5@h1)", "w:0 (pid 6@h1)"]


def test_empty_or_missing_dir_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="no \\*.seg.jsonl"):
        build_timeline(str(tmp_path))
    with pytest.raises(FileNotFoundError, match="does not exist"):
        build_timeline(str(tmp_path / "nope"))


def test_write_timeline_json_and_gzip_and_cli(tmp_path, capsys):
    d = _two_process_dir(tmp_path)
    p = write_timeline(str(tmp_path))  # the save path: finds timeline/
    assert p == d / "timeline.json"
    assert json.loads(p.read_text())["traceEvents"]
    pz = write_timeline(str(d), gzip=True)
    assert pz.name == "timeline.json.gz" and not p.exists()  # no stale merge left beside it
    assert load_timeline(str(pz)) == json.loads(gzip.decompress(pz.read_bytes()))
    assert cli_main(["merge", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "ActorGroup:0" in out and "offset -5000.000 ms" in out and (d / "timeline.json").exists()
    assert cli_main(["merge", str(tmp_path / "empty")]) == 1


# ------------------------------------------------------------------------------ offset estimator


def test_estimator_keeps_min_rtt_midpoint():
    # reference times t0/t1; remote clock = reference + 1000 (offset -1000)
    samples = [(0, 1500, 1000), (2000, 3050, 2100), (5000, 6900, 8000)]
    est = estimate_offset(samples)
    assert est.rtt_ns == 100 and est.offset_ns == 2050 - 3050 and est.uncertainty_ns == 50
    assert estimate_offset([]) is None


@settings(max_examples=200, deadline=None)
@given(
    offset=st.integers(-10**12, 10**12),
    trips=st.lists(st.tuples(st.integers(0, 10**9), st.integers(1, 10**7), st.floats(0, 1)), min_size=1, max_size=10),
)
def test_estimator_error_within_uncertainty(offset, trips):
    samples = []
    for t0, rtt, frac in trips:
        t_read = t0 + int(rtt * frac)  # the remote read happened somewhere inside the round trip
        samples.append((t0, t_read - offset, t0 + rtt))
    est = estimate_offset(samples)
    assert abs(est.offset_ns - offset) <= est.uncertainty_ns


def test_measure_offset_with_a_skewed_clock():
    skew = 3_000_000_000
    est = measure_offset(lambda: time.time_ns() + skew, time.time_ns, rounds=5)
    assert abs(est.offset_ns + skew) <= est.uncertainty_ns + 1000


# ------------------------------------------------------------------------------ SIGKILL


_CHILD = textwrap.dedent(
    """
    import sys, time
    from mindspeed_profiler.tracing import init_tracer, trace_span
    cfg = {"integrated": {"profile_save_path": sys.argv[1]}, "tracer": {"enable": True, "flush_interval_s": %(interval)s}}
    init_tracer(cfg, role="victim", rank=3)
    i = 0
    while True:
        with trace_span("work", args={"i": i}):
            time.sleep(0.002)
        i += 1
        if i == 50:
            print("ready", flush=True)
    """
)


def test_sigkill_loses_at_most_the_last_flush_interval(tmp_path):
    interval = 0.3
    proc = subprocess.Popen([sys.executable, "-c", _CHILD % {"interval": interval}, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(1.5)  # several flush intervals of spans
        kill_wall_ns = time.time_ns()
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL
    trace = write_timeline(str(tmp_path))
    data = load_timeline(str(trace))
    spans = [e for e in data["traceEvents"] if e["ph"] == "X"]
    info = data["otherData"]["processes"][0]
    assert info["name"] == "victim:3" and not info["closed"]
    iters = [e["args"]["i"] for e in spans]
    assert iters == list(range(len(iters)))  # nothing missing before the last flush
    last_end_ns = data["otherData"]["time_origin_unix_ns"] + int((spans[-1]["ts"] + spans[-1]["dur"]) * 1000)
    lost_s = (kill_wall_ns - last_end_ns) / 1e9
    print(f"\nSIGKILL: {len(spans)} spans on disk, last one ended {lost_s * 1000:.0f} ms before the kill (flush interval {interval * 1000:.0f} ms)")
    # at most one flush interval, plus scheduling slack on a busy 2-core box
    assert lost_s <= interval + 0.5, f"lost {lost_s:.3f} s of spans (flush interval {interval} s)"
