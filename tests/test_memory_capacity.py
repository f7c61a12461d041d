"""Device memory capacity from a real Kineto trace's deviceProperties (HTA's alexnet trace, 8 A100s:
tests/data/README.md), given to the GPU rows of the memory records; the advisor's
memory_near_capacity rule on the same real trace with [memory] events injected (the trace has none)
near, and far from, device 0's capacity."""
from __future__ import annotations

import gzip
import json

import pytest

from mindspeed_profiler.analysis.analyzers import advisor
from mindspeed_profiler.analysis.pipeline.batch import analyse_directory
from mindspeed_profiler.analysis.parsing.kineto_trace import device_properties, read_kineto_trace
from conftest import REPO_ROOT

ALEXNET = REPO_ROOT / "tests" / "data" / "hta" / "critical_path" / "alexnet" / "benchmark_result_2869224_1695835535_trace.json.gz"


def _raw() -> dict:
    with gzip.open(ALEXNET, "rt") as fh:
        return json.load(fh)


def test_device_properties_as_the_trace_gives_them():
    raw = _raw()["deviceProperties"]
    got = read_kineto_trace(ALEXNET).devices
    assert got == [{"id": d["id"], "name": d["name"], "total_memory_bytes": d["totalGlobalMem"]} for d in raw]
    assert got[0] == {"id": 0, "name": "NVIDIA A100-PG509-200", "total_memory_bytes": 42297524224}
    assert device_properties([{"id": True}, {"name": "x"}, "junk"]) is None and device_properties(None) is None
    assert device_properties([{"id": 1, "totalGlobalMem": -5}]) == [{"id": 1, "name": "", "total_memory_bytes": None}]


def _with_memory(tmp_path, reserved_share: float):
    d = _raw()
    cap = d["deviceProperties"][0]["totalGlobalMem"]
    op = next(e for e in d["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "cpu_op")
    for k, share in enumerate((reserved_share / 2, reserved_share)):
        d["traceEvents"].append({"ph": "i", "s": "t", "name": "[memory]", "pid": op["pid"], "tid": op["tid"],
                                 "ts": op["ts"] + k, "args": {"Device Type": 1, "Device Id": 0, "Bytes": 1 << 20,
                                                              "Total Allocated": int(cap * share * 0.9),
                                                              "Total Reserved": int(cap * share)}})
    with gzip.open(tmp_path / "rank0.pt.trace.json.gz", "wt") as fh:
        json.dump(d, fh)
    summary, code = analyse_directory(tmp_path, jobs=1, html=False, write=False, progress=False)
    assert code == 0
    return summary, cap


def test_a_gpu_near_its_capacity_is_a_finding(tmp_path):
    summary, cap = _with_memory(tmp_path, 0.95)
    row, = summary["captures"][0]["memory_records"]["devices"]
    assert row["device"] == "CUDA:0" and row["capacity_bytes"] == cap and row["peak_reserved_bytes"] == int(cap * 0.95)
    f, = [f for f in summary["findings"] if f["id"] == "memory_near_capacity"]
    assert "CUDA:0: peak memory 95% of the device's" in f["title"]
    assert f["evidence"]["capacity_bytes"] == cap and f["evidence"]["used_share"] == pytest.approx(0.95, abs=1e-9)


def test_a_gpu_with_room_is_none(tmp_path):
    summary, _ = _with_memory(tmp_path, 0.5)
    assert summary["captures"][0]["memory_records"]["devices"][0]["capacity_bytes"]
    assert not [f for f in summary["findings"] if f["id"] == "memory_near_capacity"]
    assert advisor.memory_near_capacity(summary) == []
