"""tools/same_numbers.py's comparison on tiny hand-made outputs: a difference in summary.json, in an
analysis.db table or in a model's rows is found; the run-time columns and keys are not differences."""
from __future__ import annotations

import importlib.util
import json
import sqlite3
from pathlib import Path

import pytest

from conftest import REPO_ROOT

_spec = importlib.util.spec_from_file_location("same_numbers", REPO_ROOT / "tools" / "same_numbers.py")
sn = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sn)

SUMMARY = {"created": "2026-01-01T00:00:00", "root": "/data/a", "elapsed_s": 1.5,
           "captures": [{"path": "r0", "analyse_s": 0.2, "wall_us": 100.0, "steps": [{"step": 1, "dur_us": 50.0}]}]}
CAPTURES = [(1, "r0", 100.0, 0.2, 3), (2, "r1", 120.0, 0.3, 4)]


# "n" has no type: SQLite keeps 3 and 3.0 as they were given (an INTEGER column would store 3.0 as 3)
def _output(d: Path, summary: dict = SUMMARY, captures: list = CAPTURES, nan_rows: int = 1) -> Path:
    d.mkdir(parents=True)
    (d / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    con = sqlite3.connect(d / "analysis.db")
    con.execute('CREATE TABLE captures("id" INTEGER PRIMARY KEY, "path" TEXT, "wall_us" REAL, "analyse_s" REAL, "n")')
    con.executemany("INSERT INTO captures VALUES (?, ?, ?, ?, ?)", captures)
    con.execute('CREATE TABLE steps(capture_id INTEGER, "step" INTEGER, "dur_us" REAL)')
    con.executemany("INSERT INTO steps VALUES (?, ?, ?)", [(1, i, float("nan")) for i in range(nan_rows)])
    con.commit()
    con.close()
    return d


def test_same_outputs_are_equal_though_run_times_differ(tmp_path):
    a = _output(tmp_path / "a")
    later = {**SUMMARY, "created": "2026-02-02T00:00:00", "root": "/elsewhere/a", "elapsed_s": 9.0,
             "captures": [{**SUMMARY["captures"][0], "analyse_s": 7.0}]}
    b = _output(tmp_path / "b", later, [(i, p, w, s * 10, n) for i, p, w, s, n in CAPTURES])
    assert sn.compare_outputs(a, b) == []     # created, root, elapsed_s, analyse_s (both files); NaN == NaN


def test_a_summary_difference_is_found(tmp_path):
    a = _output(tmp_path / "a")
    other = json.loads(json.dumps(SUMMARY))
    other["captures"][0]["steps"][0]["dur_us"] = 51.0
    diffs = sn.compare_outputs(a, _output(tmp_path / "b", other))
    assert diffs == ["summary: $.captures[0].steps[0].dur_us: 50.0 != 51.0"]


@pytest.mark.parametrize("captures, nan_rows, expect", [
    ([(1, "r0", 100.0, 0.2, 3), (2, "r1", 121.0, 0.3, 4)], 1, "db: captures: row 1: wall_us 120.0 != 121.0"),
    ([(1, "r0", 100.0, 0.2, 3.0), (2, "r1", 120.0, 0.3, 4)], 1, "db: captures: row 0: n 3 != 3.0"),
    (CAPTURES, 2, "db: steps: 1 rows != 2 rows"),
])
def test_a_db_difference_is_found(tmp_path, captures, nan_rows, expect):
    a = _output(tmp_path / "a")
    assert sn.compare_outputs(a, _output(tmp_path / "b", SUMMARY, captures, nan_rows)) == [expect]


def test_tables_and_columns_on_one_side_only(tmp_path):
    a, b = _output(tmp_path / "a"), _output(tmp_path / "b")
    con = sqlite3.connect(b / "analysis.db")
    con.execute("CREATE TABLE extra(x INTEGER)")
    con.execute('ALTER TABLE steps ADD COLUMN "device_us" REAL')
    con.execute('ALTER TABLE captures ADD COLUMN "created" TEXT')      # a run-time column: not a difference
    con.commit()
    con.close()
    assert sn.compare_dbs(a / "analysis.db", b / "analysis.db") == [
        "db: table extra only in B",
        "db: steps: columns ['capture_id', 'step', 'dur_us'] != ['capture_id', 'step', 'dur_us', 'device_us']"]
    (b / "summary.json").unlink()
    assert "summary.json only in A" in sn.compare_outputs(a, b)


def test_model_rows_compared_without_run_times():
    rows = {"captures": [{"path": "r0", "analyse_s": 0.2, "wall_us": 100.0}], "ops": []}
    assert sn.compare_models(rows, {**rows, "captures": [{"path": "r0", "analyse_s": 5.0, "wall_us": 100.0}]}) == []
    assert sn.compare_models(rows, {**rows, "ops": [{"name": "mm"}]}) == ["models.ops: len 0 != len 1"]
    assert sn.compare_models(rows, {"captures": rows["captures"]}) == ["models.ops: only in A ([])"]
