"""One trace parsed by two processes (parsing/split_parse.py) gives exactly one reader's result.

Real traces (HolisticTraceAnalysis' test data in tests/data/hta, ../shared's Kineto traces) and
hand-made ones with every kind of event, split at the middle into a real forked helper; plus the
cases where the split must give up (no boundary near the middle, the middle past the event array,
a helper that dies) and the error of a truncated file. Small chunks and no size floor, so that
small files are cut into many batches and split.
"""
from __future__ import annotations

import gzip
import os
from pathlib import Path

import numpy as np
import orjson
import pytest

from mindspeed_profiler.core import reaper
from mindspeed_profiler.analysis.pipeline.collect import run_captures
from mindspeed_profiler.analysis.pipeline.discover import Capture
from mindspeed_profiler.analysis.parsing import jsonscan, split_parse
from mindspeed_profiler.analysis.parsing.events import EventTable
from mindspeed_profiler.analysis.parsing.kineto_trace import read_kineto_trace
from conftest import SHARED_DATA

HERE = Path(__file__).resolve().parent
REAL = sorted((HERE / "data" / "hta").rglob("*.json.gz")) + sorted((SHARED_DATA / "kineto").glob("*.json.gz")) \
    + sorted((SHARED_DATA.parent / "kineto-torch19").glob("*.json.gz"))

pytestmark = pytest.mark.skipif(not split_parse.sys.platform.startswith("linux"), reason="the helper is forked (Linux)")


class Seen(list):
    """The merges (rows of the helper's part), and what they saw: this process' rows before the
    merge, whether its t0 was still unknown; the times_exact of every finished table; the forks."""
    def __init__(self):
        super().__init__()
        self.own_rows, self.t0_unknown, self.times_exact, self.forks, self.pids = [], [], [], 0, []


@pytest.fixture
def small_batches(monkeypatch):
    """Every file streamed, in 8 KB chunks, and split whatever its size; records the merges."""
    monkeypatch.setattr(jsonscan, "STREAM_THRESHOLD", 0)
    monkeypatch.setattr(jsonscan, "CHUNK", 8 << 10)
    monkeypatch.setattr(jsonscan, "_FAST_WINDOW", 8 << 10)
    monkeypatch.setattr(split_parse, "MIN_BYTES", 0)
    seen = Seen()
    real_absorb, real_finish, real_fork = EventTable.absorb, EventTable.finish, os.fork

    def absorb(self, p):
        seen.append(p["n"])
        seen.own_rows.append(self._n)
        seen.t0_unknown.append(self.t0_us is None)
        return real_absorb(self, p)

    def finish(self):
        seen.times_exact.append(self.times_exact)
        return real_finish(self)

    def fork():
        seen.forks += 1
        pid = real_fork()
        if pid:
            seen.pids.append(pid)
        return pid

    monkeypatch.setattr(EventTable, "absorb", absorb)
    monkeypatch.setattr(EventTable, "finish", finish)
    monkeypatch.setattr(split_parse.os, "fork", fork)
    return seen


def _same(a, b) -> None:
    ea, eb = a.events, b.events
    for k in ea.ARRAYS:
        x, y = getattr(ea, k), getattr(eb, k)
        assert x.dtype == y.dtype and np.array_equal(x, y, equal_nan=x.dtype.kind == "f"), k
    for k in ("names", "cats", "pids", "tids", "tasks", "t0_us", "process_names", "thread_names", "n_raw", "n_bad",
              "n_memory", "comm_args"):
        assert getattr(ea, k) == getattr(eb, k), k
    assert (a.distributed, a.devices) == (b.distributed, b.devices)
    assert (a.memory is None) == (b.memory is None)
    if a.memory is not None:
        assert (a.memory.records, a.memory.n_bad, a.memory.base_ns) == (b.memory.records, b.memory.n_bad, b.memory.base_ns)
        assert (a.memory.raw_ts is None) == (b.memory.raw_ts is None)
        assert a.memory.raw_ts is None or np.array_equal(a.memory.raw_ts, b.memory.raw_ts)


def _both(path: Path, seen: Seen | None = None):
    one = read_kineto_trace(path)
    with split_parse.helpers(1):
        two = read_kineto_trace(path)
    if seen is not None:   # the tables finished (the last of each parse) had the same times_exact
        assert seen.times_exact[0] == seen.times_exact[-1]
    return one, two


@pytest.mark.parametrize("path", REAL, ids=lambda p: p.name)
def test_a_real_trace_parses_the_same_in_two_processes(path, small_batches):
    one, two = _both(path, small_batches)
    _same(one, two)
    if jsonscan.expanded_size(path) > 1 << 20:   # (a small one may have its events past the middle)
        assert len(small_batches) == 1 and 0 < small_batches[0] < len(one.events)   # split, rows on both sides


def _synthetic(n: int = 3000, first_half_x: bool = True, text_ts: bool = False) -> dict:
    """Every kind of event the table reads, spread over the whole file: complete events with
    correlation ids and collective args, [memory] instants, B / E pairs (one crossing the middle),
    process / thread names renamed in the second half, flows, NaN-free junk the dict path takes."""
    evs = [{"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "trainer"}},
           {"ph": "M", "name": "thread_name", "pid": 1, "tid": 7, "args": {"name": "main"}}]
    base = 1_704_161_511_420_306
    for i in range(n):
        ts = base + i * 10
        t = f"{ts}.{i % 1000:03d}" if text_ts else ts + (i % 7) * 0.125
        if first_half_x or i >= n // 2:
            evs.append({"ph": "X", "cat": "kernel" if i % 3 else "cpu_op", "name": f"op{i % 97}", "pid": 1 + i % 2,
                        "tid": 7 + i % 3, "ts": t, "dur": 3 + i % 5,
                        "args": {"correlation": i, "grid": [1, 2, 3], "Task Type": "AI_CORE" if i % 4 == 0 else None,
                                 **({"In msg nelems": i, "Collective name": "all_reduce", "Group size": 8} if i % 50 == 0 else {})}})
        else:   # padded like a complete event with its args, so that the middle falls among these
            evs.append({"ph": "i", "s": "t", "name": "marker", "pid": 1, "tid": 7, "ts": t, "args": {"pad": "p" * 300}})
        if i % 11 == 0:
            evs.append({"ph": "i", "s": "t", "name": "[memory]", "pid": 1, "tid": 7, "ts": ts,
                        "args": {"Device Type": 1, "Device Id": 0, "Bytes": 512 if i % 2 else -512,
                                 "Total Allocated": 4096 + i, "Total Reserved": 8192}})
        if i % 400 == 5:
            evs.append({"ph": "s", "id": i, "name": "flow", "pid": 1, "tid": 7, "ts": ts, "cat": "ac2g"})
        if i in (10, n // 2 - 3):   # a B / E pair near the start and one crossing the middle
            evs.append({"ph": "B", "name": f"range{i}", "pid": 1, "tid": 9, "ts": ts, "args": {"k": i}})
        if i in (20, n // 2 + 40):
            evs.append({"ph": "E", "pid": 1, "tid": 9, "ts": ts})
        if i == n * 3 // 4:
            evs.append({"ph": "M", "name": "thread_name", "pid": 1, "tid": 7, "args": {"name": "renamed"}})
    return {"schemaVersion": 1, "distributedInfo": {"rank": 3, "world_size": 8, "backend": "nccl"},
            "traceEvents": evs, "deviceProperties": [{"id": 0, "name": "GPU", "totalGlobalMem": 1 << 30}],
            "baseTimeNanoseconds": 1_700_000_000_000_000_123}


@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gzip"])
@pytest.mark.parametrize("kind", ["numbers", "text times", "first half without complete events"])
def test_every_kind_of_event_parses_the_same_in_two_processes(tmp_path, small_batches, gz, kind):
    obj = _synthetic(text_ts=kind == "text times", first_half_x=kind != "first half without complete events")
    data = orjson.dumps(obj, option=orjson.OPT_INDENT_2)
    p = tmp_path / ("t.json.gz" if gz else "t.json")
    p.write_bytes(gzip.compress(data) if gz else data)
    one, two = _both(p, small_batches)
    _same(one, two)
    assert len(one.events) > 1000 and one.memory is not None and one.events.comm_args
    assert len(small_batches) == 1 and small_batches[0] > 0   # split, the helper with rows
    if kind == "first half without complete events":   # then the helper took its own t0
        assert small_batches.own_rows == [0] and small_batches.t0_unknown == [True]
    else:
        assert small_batches.own_rows[0] > 0 and small_batches.t0_unknown == [False]


def test_no_boundary_near_the_middle_reads_on_alone(tmp_path, small_batches, monkeypatch):
    # one event of 300 KB straddles the middle: no "}, {" within the helper's window
    monkeypatch.setattr(split_parse, "WINDOW", 64 << 10)
    evs = [{"ph": "X", "name": f"a{i}", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": i, "dur": 1} for i in range(3000)]
    evs.insert(1500, {"ph": "X", "name": "big", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": 1500, "dur": 1,
                      "args": {"blob": "x" * (600 << 10)}})
    p = tmp_path / "t.json"
    p.write_bytes(orjson.dumps({"traceEvents": evs}))
    one, two = _both(p)
    _same(one, two)
    assert small_batches == []


def test_a_middle_past_the_event_array_gives_up(tmp_path, small_batches):
    # the top-level key after the events is larger than they are, and full of "}, {"
    evs = [{"ph": "X", "name": f"a{i}", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": i, "dur": 1} for i in range(500)]
    p = tmp_path / "t.json"
    p.write_bytes(orjson.dumps({"traceEvents": evs, "extra": [{"k": i} for i in range(20000)]}))
    one, two = _both(p)
    _same(one, two)
    assert small_batches == []


def test_a_helper_that_dies_before_the_boundary_leaves_the_parse_to_this_process(tmp_path, small_batches, monkeypatch):
    monkeypatch.setattr(split_parse, "_helper", lambda *a: os._exit(3))
    p = tmp_path / "t.json"
    p.write_bytes(orjson.dumps(_synthetic()))
    one, two = _both(p)
    _same(one, two)
    assert small_batches == []


@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gzip"])
def test_a_truncated_file_fails_as_with_one_process(tmp_path, small_batches, gz):
    # cut three quarters in: the helper's half is where the array never ends. A truncated gzip has
    # no trailer, so its size is guessed: a copy whose trailer still says the right size splits too.
    data = orjson.dumps(_synthetic())
    cut = data[: len(data) * 3 // 4]
    p = tmp_path / ("t.json.gz" if gz else "t.json")
    if gz:   # a whole gzip member of the cut bytes, with a trailer claiming the full size
        blob = gzip.compress(cut)
        p.write_bytes(blob[:-4] + len(data).to_bytes(4, "little"))
    else:
        p.write_bytes(cut)
    errors = []
    for n in (0, 1):
        with split_parse.helpers(n), pytest.raises(jsonscan.TraceFormatError) as exc:
            read_kineto_trace(p)
        errors.append(str(exc.value))
    assert errors[0] == errors[1]
    assert ("incorrect length check" if gz else "never ends") in errors[0]
    assert small_batches.forks == 1 and small_batches == []   # the helper ran, and failed: one reader's error


@pytest.mark.parametrize("how", ["dies after the boundary", "fails after the boundary"])
def test_a_helper_lost_after_the_boundary_leaves_the_parse_to_one_process(tmp_path, small_batches, monkeypatch, how):
    def part(self):   # runs in the helper only (this process never builds a part)
        if how == "dies after the boundary":
            os._exit(5)
        raise RuntimeError("a failing helper")

    monkeypatch.setattr(EventTable, "part", part)
    p = tmp_path / "t.json"
    p.write_bytes(orjson.dumps(_synthetic()))
    one, two = _both(p, small_batches)
    _same(one, two)
    assert small_batches.forks == 1 and small_batches == []


class _Expired(Exception):
    pass


def test_a_time_limit_during_the_split_goes_through_and_reaps_the_helper(tmp_path, small_batches, monkeypatch):
    import signal
    import time

    monkeypatch.setattr(EventTable, "part", lambda self: time.sleep(30))   # the helper hangs before replying
    p = tmp_path / "t.json"
    p.write_bytes(orjson.dumps(_synthetic()))

    def expired(signum, frame):
        raise _Expired()

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, 1.0)   # what collect.run_in_process does, sooner
    t = time.perf_counter()
    try:
        with split_parse.helpers(1), pytest.raises(_Expired):
            read_kineto_trace(p)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert time.perf_counter() - t < 10 and small_batches.forks == 1
    reaper.reap_all()   # killed (core/reaper.py collects it): at once, not after its 30 s
    assert time.perf_counter() - t < 10
    with pytest.raises(ChildProcessError):
        os.waitpid(small_batches.pids[0], os.WNOHANG)


def test_nested_boundaries_are_passed_over(tmp_path, small_batches):
    # every event's args hold a list of objects: most "}, {" near the middle are inside an event
    evs = [{"ph": "X", "name": f"k{i % 13}", "cat": "kernel", "pid": 0, "tid": 1, "ts": 1000 + i, "dur": 1,
            "args": {"correlation": i, "shapes": [{"d": j} for j in range(40)]}} for i in range(4000)]
    p = tmp_path / "t.json"
    p.write_bytes(orjson.dumps({"traceEvents": evs}))
    one, two = _both(p, small_batches)
    _same(one, two)
    assert len(small_batches) == 1 and small_batches[0] > 0 and small_batches.own_rows[0] > 0


def test_a_boundary_that_does_not_parse_leaves_this_process_reading_alone(tmp_path, small_batches, monkeypatch):
    # a helper that picks a "boundary" inside a string: this process' batch up to it cannot parse,
    # so it reads on to the end itself (no second parse from the start) and drops the helper
    evs = [{"ph": "X", "name": "f(}, {x)" if i == 2100 else f"a{i}", "cat": "cpu_op", "pid": 1, "tid": 1,
            "ts": i, "dur": 1} for i in range(4000)]
    p = tmp_path / "t.json"
    data = orjson.dumps({"traceEvents": evs})
    p.write_bytes(data)
    inside = data.index(b"f(}, {x)") + 3   # just past the '}' in the name
    monkeypatch.setattr(split_parse, "_bound", lambda chunks: (inside - len(data) // 2, b", {x)" + data[inside + 3:]))
    heads = []
    real_head = jsonscan.read_head
    monkeypatch.setattr(jsonscan, "read_head", lambda chunks: heads.append(1) or real_head(chunks))
    one, two = _both(p, small_batches)
    _same(one, two)
    assert small_batches.forks == 1 and small_batches == [] and len(heads) == 2   # one read each


def test_only_a_lone_capture_with_jobs_to_spare_may_split(tmp_path):
    seen = []

    def fn(root, cap, top_n, want_events):
        seen.append(split_parse.HELPERS)
        return {"capture": {"path": cap["path"], "status": "ok"}, "events": None}

    caps = [Capture(path=f"c{i}", kind="kineto", files=[]) for i in range(2)]
    run_captures(tmp_path, caps[:1], 2, 20, False, False, fn)    # one capture, -j 2: one helper
    run_captures(tmp_path, caps[:1], 1, 20, False, False, fn)    # -j 1: none
    run_captures(tmp_path, caps, 2, 20, False, False, fn)        # two (small: in this process): none
    assert seen == [1, 0, 0, 0] and split_parse.HELPERS == 0


def test_analyse_of_a_lone_trace_with_two_jobs_splits_and_gives_the_same_summary(tmp_path, small_batches):
    from mindspeed_profiler.analysis.pipeline.batch import analyse_directory

    src = HERE / "data" / "hta" / "nccl_parser_config" / "nccl_data.json.gz"
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / src.name).write_bytes(src.read_bytes())

    def summary(jobs: int) -> dict:
        s, code = analyse_directory(tmp_path / "run", jobs=jobs, progress=False, write=False)
        assert code == 0
        for c in s["captures"]:
            c.pop("analyse_s", None)
        return {k: v for k, v in s.items() if k not in ("elapsed_s", "created", "options")}

    one = summary(1)
    assert small_batches == []
    two = summary(2)
    assert len(small_batches) == 1 and one == two


def test_a_fork_that_fails_leaves_the_parse_to_one_process(tmp_path, small_batches, monkeypatch):
    def no_fork():
        raise BlockingIOError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(split_parse.os, "fork", no_fork)
    fds = len(os.listdir("/proc/self/fd"))
    p = tmp_path / "t.json"
    p.write_bytes(orjson.dumps(_synthetic()))
    one, two = _both(p)
    _same(one, two)
    assert small_batches == [] and len(os.listdir("/proc/self/fd")) == fds   # no pipe left open
