"""The third adversarial round (issue 31), Ascend captures: one bad value fails nothing but its cell
or row. A number that overflows, a NULL in the db export, a rank in other digits, a CSV with a
header alone: each is a warning naming file (or table), column and value, and the rest of the
capture is analysed. Each input is a real capture (../shared/ascend-2rank, tests/data/ascend)
copied and damaged."""
from __future__ import annotations

import csv
import shutil
import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

import ascend_data
from mindspeed_profiler.analysis.pipeline.batch import analyse_directory
from mindspeed_profiler.analysis.parsing import numbers


def _rank0(ascend_sets, name: str, tmp_path: Path) -> Path:
    """A writable copy of rank 0 of a real set, alone under tmp_path/run."""
    ascend_sets(name)
    run = ascend_data.writable_copy(name, tmp_path / "run")
    for d in run.iterdir():
        if d.name != "rank0_ascend_pt":
            shutil.rmtree(d)
    return run / "rank0_ascend_pt"


def _output(cap: Path, name: str) -> Path:
    return cap / "ASCEND_PROFILER_OUTPUT" / name


def _set_cells(path: Path, column: str, value: str, n: int = 1) -> None:
    """The first n data rows of a CSV get `value` in `column`."""
    with open(path, newline="", encoding="utf-8-sig") as f:
        rows = list(csv.reader(f))
    i = rows[0].index(column)
    for r in rows[1:n + 1]:
        r[i] = value
    with open(path, "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows(rows)


def _analysed(root: Path) -> dict:
    summary, _code = analyse_directory(root, jobs=1, progress=False, write=False)
    (c,) = summary["captures"]
    assert c["status"] == "ok", c.get("error")
    return c


# ---------------------------------------------------------------- 5. a number that overflows


@pytest.mark.parametrize("value", ["1e400", "inf", "nan", "1e999990"])
@pytest.mark.parametrize("name,column", [("memory_record.csv", "Total Reserved(MB)"), ("operator_memory.csv", "Size(KB)")])
def test_an_overflowing_number_in_the_memory_csvs_is_one_bad_cell(ascend_sets, tmp_path, name, column, value):
    cap = _rank0(ascend_sets, "text_l0", tmp_path)
    _set_cells(_output(cap, name), column, value)
    c = _analysed(tmp_path / "run")
    said = [w for w in c["warnings"] if w.startswith(name)]
    assert said and all(column in w and repr(value) in w and "allowed" in w for w in said), c["warnings"]
    assert c["step_trace"] and c["memory_records"]["devices"] and c["memory_records"]["ops"]   # the rest analysed
    assert max(r["bytes"] for r in c["memory_records"]["ops"]) < numbers.INT64


@pytest.mark.parametrize("column", ["Duration(us)", "Start Time(us)"])
@pytest.mark.parametrize("value", ["1e400", "inf", "1e999990"])
def test_an_overflowing_number_in_kernel_details_is_one_bad_row(ascend_sets, tmp_path, column, value):
    cap = _rank0(ascend_sets, "text_l0", tmp_path)
    _set_cells(_output(cap, "kernel_details.csv"), column, value, n=2)
    c = _analysed(tmp_path / "run")
    assert c["n_bad_kernels"] == 2 and c["n_kernels"] > 0 and c["step_trace"]
    assert any(w.startswith("kernel_details.csv: 2 bad value(s) in column " + column) and repr(value) in w
               for w in c["warnings"]), c["warnings"]


# ---------------------------------------------------------------- 6. numbers in bounded time

_ANALYSE = ("import json, sys; from mindspeed_profiler.analysis.pipeline.batch import analyse_directory; "
            "s, _ = analyse_directory(sys.argv[1], jobs=1, progress=False, write=False); "
            "print(json.dumps([c['status'] for c in s['captures']]))")


def test_huge_exponents_in_operator_memory_are_parsed_in_bounded_time(ascend_sets, tmp_path):
    """Eight Size(KB) cells of 1e999990: each was a million-digit integer (~30 s of CPU); now a
    bad cell each, the capture analysed in seconds (bound: 60 s for the whole child process)."""
    cap = _rank0(ascend_sets, "text_l0", tmp_path)
    _set_cells(_output(cap, "operator_memory.csv"), "Size(KB)", "1e999990", n=8)
    t = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", _ANALYSE, str(tmp_path / "run")], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0 and json.loads(p.stdout.splitlines()[-1]) == ["ok"], p.stderr[-2000:]
    assert time.perf_counter() - t < 60


@pytest.mark.parametrize("text", ["1e999990", "-1e999990", "1e-999990", "0e999999", "9" * 100])
def test_exact_int_is_bounded(text):
    t = time.perf_counter()
    for _ in range(8):
        try:
            n = numbers.exact_int(text, 1024)
        except ValueError as exc:
            assert repr(text)[:20] in str(exc)
        else:
            assert n == 0
    assert time.perf_counter() - t < 5   # the unbounded conversion took ~30 s per cell


# ---------------------------------------------------------------- 13. NULLs in the db export


def _db_of(cap: Path) -> Path:
    (db,) = (cap / "ASCEND_PROFILER_OUTPUT").glob("ascend_pytorch_profiler_*.db")
    return db


def _update(db: Path, sql: str) -> None:
    con = sqlite3.connect(db)
    try:
        con.execute(sql)
        con.commit()
    finally:
        con.close()


@pytest.mark.parametrize("table,column", [("RANK_DEVICE_MAP", "deviceId"), ("RANK_DEVICE_MAP", "rankId"),
                                          ("OVERLAP_ANALYSIS", "type")])
@pytest.mark.parametrize("value", ["NULL", "'x'", "9e999"])
def test_a_null_in_the_db_export_leaves_out_its_row_with_a_warning(ascend_sets, tmp_path, table, column, value):
    cap = _rank0(ascend_sets, "db_l1", tmp_path)
    _update(_db_of(cap), f"UPDATE {table} SET {column} = {value} WHERE rowid IN (SELECT rowid FROM {table} LIMIT 3)")
    c = _analysed(tmp_path / "run")
    assert any(f"{table}.{column}" in w and "allowed" in w for w in c["warnings"]), c["warnings"]
    assert c["rank"] == 0 and c["step_trace"]   # the rank from profiler_info_0.json, the rest analysed


_READ = {"RANK_DEVICE_MAP": ("rankId", "deviceId"), "OVERLAP_ANALYSIS": ("startNs", "endNs", "type", "deviceId"),
         "PYTORCH_API": ("startNs", "endNs", "globalTid", "connectionId", "name", "type"),
         "STEP_TIME": ("startNs", "endNs"), "CANN_API": ("startNs", "endNs", "globalTid", "name"),
         "TASK": ("startNs", "endNs", "streamId", "connectionId", "taskType", "deviceId"),
         "COMPUTE_TASK_INFO": ("name", "taskType", "opType"),
         "COMMUNICATION_OP": ("opName", "startNs", "endNs", "connectionId", "groupName", "opType", "algType", "count",
                              "dataType"),
         "STRING_IDS": ("value",), "NPU_INFO": ("name",),
         "MEMORY_RECORD": ("component", "timestamp", "totalAllocated", "totalReserved", "totalActive", "deviceId"),
         "OP_MEMORY": ("name", "size", "deviceId")}


@pytest.mark.parametrize("value", ["NULL", "'²'", "9e999"])
def test_no_value_in_any_column_read_fails_a_db_capture(ascend_sets, tmp_path, value):
    """Every column the analysis reads of the db export, all NULL (or text, or inf) in turn: the
    capture is analysed each time."""
    from mindspeed_profiler.analysis.inputs.ascend_capture import AscendFiles, analyse_ascend
    cap = _rank0(ascend_sets, "db_l1", tmp_path)
    db = _db_of(cap)
    original = db.read_bytes()
    failed = []
    for table, columns in _READ.items():
        for column in columns:
            db.write_bytes(original)
            _update(db, f"UPDATE {table} SET {column} = {value}")
            files = AscendFiles.of(cap, [db, _output(cap, "analysis.db")])
            try:
                analyse_ascend(files, None, 10, False)
            except Exception as exc:   # noqa: BLE001 - every failure is listed
                failed.append(f"{table}.{column}: {type(exc).__name__}: {exc}")
    assert not failed, failed


# ---------------------------------------------------------------- 14. a rank in other digits


@pytest.mark.parametrize("digit", ["²", "①", "٣"])
@pytest.mark.parametrize("where", ["file name", "rank_id", "profiler_metadata.json"])
def test_a_rank_in_other_digits_is_a_warning_and_the_rank_comes_from_elsewhere(ascend_sets, tmp_path, where, digit):
    cap = _rank0(ascend_sets, "text_l0", tmp_path)
    info = cap / "profiler_info_0.json"
    if where == "file name":
        info.rename(cap / f"profiler_info_{digit}.json")
        named = f"profiler_info_{digit}.json"
    elif where == "rank_id":
        obj = json.loads(info.read_text())
        info.write_text(json.dumps(dict(obj, rank_id=digit)))
        named = "profiler_info_0.json rank_id"
    else:
        meta = cap / "profiler_metadata.json"
        meta.write_text(json.dumps(dict(json.loads(meta.read_text()), distributed_args={"rank": digit, "world_size": 2})))
        named = "profiler_metadata.json distributed_args.rank"
    c = _analysed(tmp_path / "run")
    assert any(w.startswith(named) and repr(digit) in w and "ASCII" in w for w in c["warnings"]), c["warnings"]
    assert c["rank"] == 0 and c["step_trace"]   # from the other identity field, the rest analysed


# ---------------------------------------------------------------- 15. a CSV with a header alone


@pytest.mark.parametrize("name,damage", [("step_trace_time.csv", "header"), ("kernel_details.csv", "header"),
                                         ("kernel_details.csv", "columns"), ("step_trace_time.csv", "binary")])
def test_a_header_only_csv_counts_as_missing(ascend_sets, tmp_path, name, damage):
    cap = _rank0(ascend_sets, "text_l0", tmp_path)
    path = _output(cap, name)
    if damage == "header":
        path.write_text(path.read_text(encoding="utf-8-sig").splitlines()[0] + "\n")
    elif damage == "columns":
        path.write_text("Foo,Bar\n1,2\n")
    else:
        path.write_bytes(b"\xff\xfe\x00garbage")
    c = _analysed(tmp_path / "run")
    assert any(w.startswith(f"{name}: unreadable") and "as if absent" in w for w in c["warnings"]), c["warnings"]
    assert c["step_trace"] and c["steps"]
    if name == "step_trace_time.csv":   # the breakdown from trace_view.json, as without the file
        assert c["step_trace_source"].startswith("trace_view.json")
    else:
        assert c["step_trace_source"] == "step_trace_time.csv" and "n_kernels" not in c
