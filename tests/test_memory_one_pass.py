"""Kineto [memory] events taken in the trace's one parse (parsing/memory_events.py, EventTable,
typed_events): the memory block from it (memory_peaks.table_memory) equals the block of a second
read of the file as dicts (kineto_trace_memory, the former path), on the typed and the dict parse;
where the table's rows are not the raw X events (B / E pairs, text times) it says so and the
caller reads the file again. launch_stats made in chunks equals the whole-array statistics."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from conftest import REPO_ROOT
from mindspeed_profiler.analysis.analyzers import idle_causes as ic
from mindspeed_profiler.analysis.analyzers import memory_peaks as mp
from mindspeed_profiler.analysis.analyzers.classify import classified
from mindspeed_profiler.analysis.inputs import kineto as kin
from mindspeed_profiler.analysis.parsing import jsonscan
from mindspeed_profiler.analysis.parsing.kineto_trace import read_kineto_trace
from test_memory_peaks import HAND_EVENTS, _mem

TORCH19 = sorted((REPO_ROOT.parent / "shared" / "kineto-torch19").glob("*.pt.trace.json.gz"))
RANGES = [{"ph": "X", "cat": "user_annotation", "name": "stage", "pid": 1, "tid": "1", "ts": 0, "dur": 60},
          {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#3", "pid": 1, "tid": "1", "ts": 0, "dur": 300},
          {"ph": "X", "cat": "cpu_op", "name": "float_ts", "pid": 1, "tid": "1", "ts": 39.5, "dur": 1.25},
          {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 3, "dur": 2}]


def _write(tmp_path: Path, events: list, **top) -> Path:
    p = tmp_path / "t.pt.trace.json"
    p.write_text(json.dumps({"traceEvents": events, **top}))
    return p


@pytest.fixture(params=["dicts", "typed"])
def parse_path(request, monkeypatch):
    if request.param == "typed":      # stream even a tiny file, in small batches: the typed decoder's path
        monkeypatch.setattr(jsonscan, "STREAM_THRESHOLD", 0)
    return request.param


def _no_second_read(monkeypatch) -> None:
    def fail(path):
        raise AssertionError("the trace was read a second time")
    monkeypatch.setattr(mp, "read_kineto_memory_events", fail)


@pytest.mark.parametrize("base_ns", [0, 1_000_500])
def test_hand_made_one_pass(tmp_path, monkeypatch, parse_path, base_ns):
    p = _write(tmp_path, HAND_EVENTS + RANGES + [_mem(39.75, 7, 1500)], **({"baseTimeNanoseconds": base_ns} if base_ns else {}))
    want = mp.kineto_trace_memory(p)
    assert want["devices"] and want["ops"] and want["ranges"] and want["n_bad"] == 4
    tr = read_kineto_trace(p)
    assert tr.memory is not None and tr.memory.raw_ts is not None
    assert mp.table_memory(tr.events, tr.memory) == want
    _no_second_read(monkeypatch)
    out, _ = kin.analyse_trace_file(p, mp.TOP_N, False)
    assert out["memory_records"] == want


@pytest.mark.parametrize("extra", [
    [{"ph": "B", "cat": "cpu_op", "name": "b", "pid": 1, "tid": "1", "ts": 1}, {"ph": "E", "pid": 1, "tid": "1", "ts": 80}],
    [{"ph": "X", "cat": "cpu_op", "name": "text_dur", "pid": 1, "tid": "1", "ts": 1, "dur": "70"}],
    [{"ph": "X", "cat": "cpu_op", "name": "text_ts", "pid": 1, "tid": "1", "ts": "1", "dur": 70}],
    [{"ph": "X", "cat": "cpu_op", "name": "bool_ts", "pid": 1, "tid": "1", "ts": True, "dur": 70}],
    [{"ph": "X", "cat": "cpu_op", "name": "neg", "pid": 1, "tid": "1", "ts": 1, "dur": -5}],
], ids=["begin_end", "text_dur", "text_ts", "bool_ts", "negative_dur"])
def test_rows_not_raw_read_again(tmp_path, parse_path, extra):
    p = _write(tmp_path, HAND_EVENTS + extra)
    tr = read_kineto_trace(p)
    assert tr.memory is not None and tr.memory.raw_ts is None
    out, _ = kin.analyse_trace_file(p, mp.TOP_N, False)
    assert out["memory_records"] == mp.kineto_trace_memory(p)


def test_no_memory_events(tmp_path):
    assert read_kineto_trace(_write(tmp_path, RANGES)).memory is None


@pytest.mark.skipif(not TORCH19, reason="../shared/kineto-torch19 absent")
@pytest.mark.parametrize("path", TORCH19, ids=lambda p: p.name)
def test_torch19_one_pass(path, monkeypatch):
    want = mp.kineto_trace_memory(path)
    mp.with_capacity(want["devices"], read_kineto_trace(path).devices or [])   # as analyse_trace_file does
    _no_second_read(monkeypatch)
    out, _ = kin.analyse_trace_file(path, mp.TOP_N, False)
    assert out["memory_records"] == want and want["devices"]


def test_launch_stats_in_chunks(tmp_path, monkeypatch):
    """Correlation ids repeated (calls x activities pairs per id): chunked as whole."""
    rng = np.random.default_rng(3)
    evs = []
    for k in range(40):
        c = int(rng.integers(1, 6))
        evs.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                    "ts": float(k * 10 + rng.random()), "dur": float(rng.random() * 80), "args": {"correlation": c}})
        evs.append({"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7,
                    "ts": float(k * 10 + 5 + rng.random() * 200), "dur": float(rng.random() * 60), "args": {"correlation": c}})
    ct = classified(read_kineto_trace(_write(tmp_path, evs)).events)
    h, d = ic.launch_pairs(ct)
    cpu, dev = ct.dur[h], ct.dur[d]
    delay = np.maximum(ct.ts[d] - ct.ts[h] - cpu, 0.0)
    assert len(h) > len(evs)       # ids repeat: more pairs than events
    whole = ic.launch_stats(ct)
    assert whole["n_launches"] == len(h) and whole["launch_delay_median_us"] == float(np.median(delay))
    assert whole["cpu_duration_total_us"] == float(cpu.sum()) and whole["n_device_shorter"] == int((dev < cpu).sum())
    monkeypatch.setattr(ic, "PAIR_CHUNK", 7)
    chunked = ic.launch_stats(ct)
    assert chunked.keys() == whole.keys()
    for k, v in whole.items():
        assert chunked[k] == pytest.approx(v, rel=1e-12), k


@pytest.mark.parametrize("args", [
    {"Device Type": 1, "Device Id": 0, "Bytes": 5, "Total Allocated": 7, "Total Reserved": None},
    {"Device Type": 1, "Device Id": 0, "Bytes": "5"}, {"Device Type": True, "Device Id": 0, "Bytes": 5},
    {"Device Type": 1, "Device Id": 0, "Bytes": 2**63}, {"Device Type": 1, "Device Id": 0, "Bytes": -2**63},
    {"Device Type": 1, "Device Id": 0, "Bytes": 5, "Total Allocated": -1}, {"Device Type": 1, "Bytes": 5},
    {"Device Type": 1, "Device Id": 0, "Bytes": 5.0}, {}, None, [1], "x", "absent",
])
@pytest.mark.parametrize("ts", [1, 1.5, "1", None, 2**60])
def test_typed_memory_record_is_the_dict_one(args, ts):
    from mindspeed_profiler.analysis.parsing import typed_events
    from mindspeed_profiler.analysis.parsing.memory_events import memory_record
    e = {"ph": "i", "name": "[memory]", "pid": 3, "tid": "t", "ts": ts, **({} if args == "absent" else {"args": args})}
    data = json.dumps([e, {"ph": "X", "name": "k", "ts": 0, "dur": 1}]).encode()
    got = typed_events.BatchDecoder()(data)
    if got is not None:     # else the batch goes to the dict path: the dict record by construction
        assert got.memory == [memory_record(e.get("ts"), e.get("pid"), e.get("tid"), e.get("args"))]
        assert got.n_memory == 1
