"""Kineto traces of every torch generation: torch 1.9's category spellings (../shared/kineto-torch19,
torch-tb-profiler's samples) are read like today's; a trace with events of no known kind is a
warning that names what was there; compare with nothing in common says why and exits non-zero.
(HTA's numbers on the same traces: tests/test_crosscheck.py.)"""
from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import sys
from collections import Counter

import pytest

from analysis_testutil import write_json
from conftest import REPO_ROOT
from mindspeed_profiler.analysis.pipeline.batch import analyse_directory

TORCH19 = REPO_ROOT.parent / "shared" / "kineto-torch19"
TRACES = ["worker0.1623143089861.pt.trace.json.gz", "worker0.1623143566756.pt.trace.json.gz"]


@pytest.fixture(scope="module")
def torch19():
    if not TORCH19.is_dir():
        pytest.skip(f"{TORCH19} not found")
    return TORCH19


@pytest.mark.parametrize("name", TRACES)
def test_torch19_steps_ops_and_kernels(torch19, tmp_path, name):
    shutil.copy(torch19 / name, tmp_path / name)
    summary, code = analyse_directory(tmp_path, jobs=1, progress=False, write=False)
    (c,) = summary["captures"]
    ev = json.load(gzip.open(torch19 / name))["traceEvents"]
    steps = sorted(int(e["name"].split("#")[1]) for e in ev if e.get("ph") == "X" and e["name"].startswith("ProfilerStep#"))
    assert code == 0 and c["warnings"] == []
    assert [s["step"] for s in c["steps"]] == steps and len(steps) == 6
    ops = Counter(e["name"] for e in ev if e.get("ph") == "X" and e.get("cat") == "Operator" and not e["name"].startswith("ProfilerStep"))
    got = {o[0]: o[1] for o in c["op_totals"]}
    assert got == dict(ops)
    kern = sum(e["dur"] for e in ev if e.get("ph") == "X" and e.get("cat") == "Kernel")
    assert sum(k[2] for k in c["kernel_totals"] if k[3] == "compute") == pytest.approx(kern)
    assert c["device"]["n_activities"] == sum(1 for e in ev if e.get("ph") == "X" and e.get("cat") in ("Kernel", "Memcpy", "Memset"))
    # per step: device busy inside the host step, all six present
    assert all(s["device_busy_us"] > 0 for s in c["steps"])


def test_compare_two_torch19_runs(torch19, tmp_path):
    for i, name in enumerate(TRACES):
        (tmp_path / f"r{i}").mkdir()
        shutil.copy(torch19 / name, tmp_path / f"r{i}" / name)
    out = tmp_path / "cmp.json"
    p = subprocess.run([sys.executable, "-m", "mindspeed_profiler.cli", "compare", str(tmp_path / "r0"), str(tmp_path / "r1"),
                        "--json", str(out)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    res = json.loads(out.read_text())
    assert res["nothing_comparable"] is None
    assert any(r["status"] == "changed" for r in res["ops"]) and any(r["status"] == "changed" for r in res["kernels"])
    assert {r["name"] for r in res["breakdown"]} == {"computing_us", "communication_exposed_us", "communication_us", "free_us"}


def test_events_of_no_known_kind_are_a_warning_naming_them(tmp_path):
    ev = [{"ph": "X", "cat": "Op", "name": f"x{i}", "pid": 1, "tid": 1, "ts": i * 10, "dur": 5} for i in range(20)]
    ev += [{"ph": "X", "cat": "GPUKernel", "name": "k", "pid": 2, "tid": 7, "ts": 3, "dur": 2}]
    ev += [{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "my tool"}}]
    write_json(tmp_path / "t.json", {"traceEvents": ev})
    summary, code = analyse_directory(tmp_path, jobs=1, progress=False, write=False)
    (c,) = summary["captures"]
    assert c["status"] == "ok" and not c["steps"] and not c["op_totals"] and c["device"] is None
    (w,) = [w for w in c["warnings"] if "none of a kind" in w]
    assert "'Op' x20" in w and "'GPUKernel' x1" in w and "my tool" in w


def test_compare_with_nothing_comparable_says_why_and_exits_1(tmp_path):
    for side in ("a", "b"):
        write_json(tmp_path / side / "t.json", {"traceEvents": [
            {"ph": "X", "cat": "Op", "name": side, "pid": 1, "tid": 1, "ts": 0, "dur": 5}]})
    p = subprocess.run([sys.executable, "-m", "mindspeed_profiler.cli", "compare", str(tmp_path / "a"), str(tmp_path / "b")],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 1
    assert "nothing comparable" in p.stderr and "A: 1 capture(s), 1 ok (kineto)" in p.stderr
