"""The analysis input registry: discovery asks it what each directory / file is, the batch asks
it how to analyse it; an input kind added from outside is one InputKind plus one registration."""
from __future__ import annotations

import csv
from pathlib import Path

import pytest

from mindspeed_profiler.analysis import inputs
from mindspeed_profiler.analysis.pipeline.batch import analyse_directory
from mindspeed_profiler.analysis.pipeline.discover import Capture, discover, rel
from mindspeed_profiler.analysis.inputs import InputKind, input_kind, input_kinds, register_input


def test_builtin_kinds():
    assert [k.name for k in input_kinds()] == ["ascend", "ascend_raw", "torch", "system", "timeline", "tracker", "samples", "memory", "rlinf_timeline",
                                               "cluster", "kineto", "unreadable"]
    with pytest.raises(ValueError, match="cannot analyse a capture of kind 'nope'"):
        input_kind("nope")


def _claim(root: Path, d: Path, names: list, claimed: set) -> list:
    out = [Capture(path=rel(root, d / n), kind="op_table", files=[rel(root, d / n)])
           for n in names if n.endswith(".ops.csv") and n not in claimed]
    claimed.update(n for n in names if n.endswith(".ops.csv"))
    return out


def _analyse(root: Path, cap: Capture, top_n: int, want_events: bool):
    with open(root / cap.files[0], newline="") as fh:
        rows = [{"name": r["name"], "count": 1, "total_us": float(r["us"]), "self_us": float(r["us"]),
                 "device_us": 0.0} for r in csv.DictReader(fh)]
    return {"top_ops": sorted(rows, key=lambda r: -r["self_us"])[:top_n]}, None


@pytest.fixture
def op_table():
    with inputs.REGISTRY.scoped():   # what the test registers is gone after it
        yield register_input(InputKind("op_table", _analyse, order=50, claim_files=_claim))


def test_a_new_input_kind_is_found_and_analysed(tmp_path, op_table):
    (tmp_path / "rank0.ops.csv").write_text("name,us\nmatmul,30\nsoftmax,5\n")
    (tmp_path / "notes.csv").write_text("x\n1\n")
    assert [(c.kind, c.path) for c in discover(tmp_path)] == [("op_table", "rank0.ops.csv")]
    summary, code = analyse_directory(tmp_path, jobs=1, progress=False, write=False, top_n=1)
    (cap,) = summary["captures"]
    assert code == 0 and cap["status"] == "ok" and [o["name"] for o in cap["top_ops"]] == ["matmul"]
