"""Ascend free (idle) time by cause (analyzers/ascend_free.py, parsing/ascend_free_db.py) against
msprof-analyze 26.2.0's `cluster -m free_analysis` recipe:

- on the real torch_npu db exports (db_l0 from ../shared/ascend-2rank, db_l1, db_l2: 2 ranks each),
  msprof-analyze runs in a child process (once per module, the `crosscheck` extra; skipped without
  it, a failure where MSP_REQUIRE_CROSSCHECK=1) with its default top 10 and with --top_num 1000
  (every gap: all three reason branches); its FreeAnalysis table must equal our rows: the same
  intervals (exact decimal text), durations, PyTorch / CANN idle times and reason text, in its
  order (top 10) or in its order up to gaps of equal duration (every gap: pandas' sort is unstable
  on more than 16 rows);
- hand-made rows pin each reason branch and the thresholds' boundaries (the 50 us wait, strict
  "inside", prev / next at the interval's edges), the busy-range merge of the export's SQL (run on
  sqlite itself for the comparison), the NULL handling pandas imposes, and the entry point's
  warnings on incomplete dbs.
"""
from __future__ import annotations

import sqlite3
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import shutil

import pytest

import ascend_data
from mindspeed_profiler.analysis.analyzers import ascend_free as af
from mindspeed_profiler.analysis.inputs.ascend_capture import capture_free
from mindspeed_profiler.analysis.parsing import ascend_free_db as fdb
from reference_tools import need

DB_SETS = ("db_l0", "db_l1", "db_l2")
VARIANTS = {"top10": [], "every gap": ["--top_num", "1000"]}

# msprof-analyze's free_analysis on each (SRC, OUT, extra args...) in one process (its import costs seconds)
DRIVER = """
import sys, json
from msprof_analyze.cluster_analyse.cluster_analysis import cluster_analysis_main
for job in json.loads(sys.argv[1]):
    sys.argv = ["msprof-analyze cluster", "-d", job[0], "-m", "free_analysis", "-o", job[1], *job[2:]]
    cluster_analysis_main()
"""


def reference_rows(out: Path) -> list[tuple]:
    """msprof-analyze's FreeAnalysis rows (rankId, startTime, endTime, duration, pytorchIdleTime,
    cannIdleTime, reason), read with sqlite3."""
    db = out / "cluster_analysis_output" / "cluster_analysis.db"
    assert db.is_file(), f"msprof-analyze wrote no {db}"
    con = sqlite3.connect(db)
    try:
        return [tuple(r) for r in con.execute(
            'SELECT rankId, "startTime(us)", "endTime(us)", "duration(us)", "pytorchIdleTime(us)", '
            '"cannIdleTime(us)", reason FROM FreeAnalysis')]
    finally:
        con.close()


@pytest.fixture(scope="module")
def msprof_free(ascend_sets, tmp_path_factory):
    """{set: {variant: msprof-analyze's rows}} and the writable copies it ran on (it checks its
    inputs' owner and permissions)."""
    need("msprof_analyze")
    import json

    root = tmp_path_factory.mktemp("msprof_free")
    jobs, copies = [], {}
    for name in DB_SETS:
        if not ascend_data.available(name):
            continue
        ascend_sets(name)
        copies[name] = ascend_data.writable_copy(name, root / "in" / name)
        jobs += [[str(copies[name]), str(root / "out" / name / v.replace(" ", "_")), *a] for v, a in VARIANTS.items()]
    if not jobs:
        pytest.skip("no Ascend db set available")
    p = subprocess.run([sys.executable, "-c", DRIVER, json.dumps(jobs)], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    ref = {n: {v: reference_rows(root / "out" / n / v.replace(" ", "_")) for v in VARIANTS} for n in copies}
    return ref, copies


def rank_dbs(capture_set: Path) -> dict[int, Path]:
    out = {}
    for db in capture_set.rglob("ascend_pytorch_profiler_*.db"):
        out[int(db.stem.rsplit("_", 1)[1])] = db
    assert out, capture_set
    return out


def as_reference(rank: int, r: dict) -> tuple:
    return (rank, r["start_time"], r["end_time"], r["duration_us"], r["pytorch_idle_us"], r["cann_idle_us"], r["reason"])


def tie_order(rows: list[tuple]) -> list[tuple]:
    """Rows by duration, longest first, equal durations by start: the order up to ties."""
    return sorted(rows, key=lambda r: (-r[3], Decimal(r[1])))


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("name", DB_SETS)
def test_rows_equal_msprof_analyze(name, variant, msprof_free):
    ref, copies = msprof_free
    if name not in copies:
        pytest.skip(f"{name} not available")
    top = 1000 if variant == "every gap" else af.DEFAULT_TOP_N
    for rank, db in sorted(rank_dbs(copies[name]).items()):
        block = capture_free(db, top)
        assert block is not None and block["warnings"] == []
        ours = [as_reference(rank, r) for r in block["rows"]]
        theirs = [r for r in ref[name][variant] if r[0] == rank]
        assert theirs, (name, rank)
        if variant == "top10":
            assert ours == theirs
        else:
            assert len(ours) == len(theirs) == block["n_free"]
            assert [r[3] for r in ours] == [r[3] for r in theirs]     # the same order of durations
            assert tie_order(ours) == tie_order(theirs)
            # every gap: the durations add up to our total free time
            assert sum(Decimal(r[2]) - Decimal(r[1]) for r in ours) == Decimal(str(block["free_us"]))
        causes = {r["cause"] for r in block["rows"]}
        assert causes <= {af.PYTORCH_IDLE, af.CANN_LAUNCH, af.DEVICE_TASKS, af.SKIPPED}
        if variant == "every gap":    # these sets hold all three analysed branches
            assert {af.PYTORCH_IDLE, af.CANN_LAUNCH, af.DEVICE_TASKS} <= causes


@pytest.mark.parametrize("name", DB_SETS)
def test_exact_ns_within_float_rounding(name, ascend_sets):
    """Without the recipe's float64 detour (msprof_float=False) the intervals are the same, the idle
    times within 2 x 256 ns of the recipe's, and no cause changes on these sets."""
    for db in rank_dbs(ascend_sets(name)).values():
        a, b = capture_free(db, 1000), capture_free(db, 1000, msprof_float=False)
        assert [(r["start_time"], r["end_time"], r["cause"]) for r in a["rows"]] == \
               [(r["start_time"], r["end_time"], r["cause"]) for r in b["rows"]]
        for x, y in zip(a["rows"], b["rows"]):
            for k in ("pytorch_idle_us", "cann_idle_us"):
                assert (x[k] is None) == (y[k] is None)
                if x[k] is not None:
                    assert abs(x[k] - y[k]) <= 0.513


@pytest.mark.parametrize("name", DB_SETS)
def test_busy_merge_equals_the_export_sql(name, ascend_sets):
    """busy_ranges on the raw rows equals msprof-analyze's own SQL (BusyTimeOverlapExport) run on
    the db by sqlite."""
    need("msprof_analyze")
    from msprof_analyze.prof_exports.free_analysis_export import QUERY_OVERLAP_BUSY_TIME_SQL
    for db in rank_dbs(ascend_sets(name)).values():
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        want = [(s, e) for s, e, _d in con.execute(QUERY_OVERLAP_BUSY_TIME_SQL)]
        con.close()
        busy, _w = fdb.read_busy_intervals(db)
        assert af.busy_ranges(busy) == want


# ------------------------------------------------------------------------------- hand-made rows


def link(ts, end, cann_ts=None, cann_end=None, pt=None, pt_end=None, ttype="KERNEL_AIVEC"):
    return {"task_type": ttype, "task_ts": ts, "task_end": end, "cann_ts": cann_ts, "cann_end": cann_end,
            "pytorch_ts": pt, "pytorch_end": pt_end}


def classify(start, end, links, msprof_float=False):
    return af.free_row(start, end, af.LinkIndex(af.normalise_links(links, msprof_float)))


def pair(prev_wait, next_wait, prev_launch=1_000, next_launch=1_000, gap=None):
    """prev task ending at 0 and next starting at 1_000_000 (ns); each launch starts `wait` after its
    PyTorch op's end and lasts `launch`; `gap`: the next launch's start after the prev launch's end
    (the next op's end then follows from it)."""
    p_end = 10_000
    p_cann = p_end + prev_wait
    n_end = 900_000 if gap is None else p_cann + prev_launch + gap - next_wait
    n_cann = n_end + next_wait
    return [link(-5_000, 0, p_cann, p_cann + prev_launch, 1, p_end),
            link(1_000_000, 1_001_000, n_cann, n_cann + next_launch, 2, n_end)]


def test_busy_ranges_merge_rules():
    # overlap, touching (start == previous end merges: the SQL's `startNs > max end`), nested, gap
    assert af.busy_ranges([(0, 10), (5, 20), (20, 30), (22, 25), (31, 40)]) == [(0, 30), (31, 40)]
    assert af.busy_ranges([(31, 40), (0, 10)]) == [(0, 10), (31, 40)]          # any input order
    assert af.busy_ranges([(10, 10), (10, 12), (13, 13)]) == [(10, 12), (13, 13)]
    assert af.busy_ranges([]) == []
    # a later row ending before an earlier one's end stays inside it
    assert af.busy_ranges([(0, 100), (10, 20), (50, 60)]) == [(0, 100)]


def test_busy_ranges_equal_sqlite_on_awkward_rows():
    """Same starts, a negative-duration row, zero-length rows: the export's SQL on sqlite itself."""
    need("msprof_analyze")
    from msprof_analyze.prof_exports.free_analysis_export import QUERY_OVERLAP_BUSY_TIME_SQL
    cases = [[(0, 10), (0, 5), (10, 10), (11, 12)], [(5, 3), (5, 9), (9, 9), (10, 20)],
             [(0, 1), (2, 3), (2, 2), (4, 4), (4, 5), (7, 6)], [(1, 1)]]
    for rows in cases:
        con = sqlite3.connect(":memory:")
        con.execute("CREATE TABLE TASK (startNs INTEGER, endNs INTEGER, globalTaskId INTEGER)")
        con.execute("CREATE TABLE COMPUTE_TASK_INFO (globalTaskId INTEGER)")
        con.execute("CREATE TABLE COMMUNICATION_OP (startNs INTEGER, endNs INTEGER)")
        con.executemany("INSERT INTO TASK VALUES (?, ?, ?)", [(s, e, i) for i, (s, e) in enumerate(rows)])
        con.executemany("INSERT INTO COMPUTE_TASK_INFO VALUES (?)", [(i,) for i in range(len(rows))])
        want = [(s, e) for s, e, _d in con.execute(QUERY_OVERLAP_BUSY_TIME_SQL)]
        assert af.busy_ranges(rows) == want, rows


def test_free_intervals_and_top():
    gaps = af.free_intervals([(0, 10), (15, 20), (30, 31), (36, 40)])
    assert gaps == [(10, 15), (20, 30), (31, 36)]
    assert af.top_free(gaps, 2) == [(20, 30), (10, 15)]       # equal durations: the earlier first
    assert af.top_free(gaps, 0) == [] and af.top_free([], 5) == []


def test_remaining_free():
    assert af.remaining_free(0, 100, []) == [(0, 100)]
    assert af.remaining_free(0, 100, [(10, 20), (15, 30), (30, 40)]) == [(0, 10), (40, 100)]   # touching merge
    assert af.remaining_free(0, 100, [(50, 50)]) == [(0, 50), (50, 100)]     # a zero-length task splits
    assert af.remaining_free(0, 100, [(-5, 10), (90, 120)]) == [(10, 90)]    # clipped
    assert af.remaining_free(0, 100, [(0, 100)]) == []


def test_type_counts_order():
    tasks = [{"task_type": t} for t in ("B", "A", "A", "B", "C", None)]
    assert af.type_counts(tasks) == [("B", 2), ("A", 2), ("C", 1)]    # most first, then first seen; NULL out


def test_device_tasks_branch_and_strict_inside():
    links = [link(0, 100), link(150, 160, ttype="MEMCPY_ASYNC"), link(170, 170, ttype="EVENT_RECORD"),
             link(180, 185, ttype="MEMCPY_ASYNC"), link(1000, 1100)]
    r = classify(100, 1000, links)
    assert r["cause"] == af.DEVICE_TASKS and r["n_device_tasks"] == 3
    assert r["reason"] == "Device task running: 2 MEMCPY_ASYNC tasks, 1 EVENT_RECORD tasks, max remaining free 0.815 us"
    assert r["max_remaining_free_us"] == 0.815 and r["pytorch_idle_us"] is None and r["cann_idle_us"] is None
    # a task starting at the interval's start or ending at its end is not inside (strict)
    edge = [link(0, 100, 1, 2, 1, 1), link(100, 150, 1, 2, 1, 1), link(900, 1000, 1, 2, 1, 1),
            link(1000, 1100, 3, 4, 1, 1)]
    r = classify(100, 1000, edge)
    assert r["cause"] == af.PYTORCH_IDLE and r["n_device_tasks"] == 0
    assert r["cann_idle_us"] == 0.002      # prev: [0, 100] (ends at the start), next: [1000, 1100]


def test_negative_duration_task_counts_inside():
    # the recipe's filter is task_ts > s and task_end < e, whatever the order of the two
    r = classify(100, 1000, [link(0, 100), link(1000, 500, ttype="X"), link(1000, 1100)])
    assert r["cause"] == af.DEVICE_TASKS and r["reason"].startswith("Device task running: 1 X tasks")


def test_skip_branches():
    assert classify(100, 200, [link(200, 300, 1, 2, 1, 1)])["reason"] == af.SKIP_NO_NEIGHBOUR   # no prev
    assert classify(100, 200, [link(0, 100, 1, 2, 1, 1)])["reason"] == af.SKIP_NO_NEIGHBOUR     # no next
    # prev ends exactly at the start, next starts exactly at the end: both count
    ok = [link(0, 100, 10, 20, 1, 5), link(200, 300, 150, 160, 2, 140)]
    assert classify(100, 200, ok)["cause"] == af.PYTORCH_IDLE
    zero = [link(0, 100, 10, 20, 0, 5), link(200, 300, 150, 160, 2, 140)]
    r = classify(100, 200, zero)
    assert r["cause"] == af.SKIPPED and r["reason"] == af.SKIP_NO_DISPATCH and r["pytorch_idle_us"] is None


def test_null_pytorch_start_follows_pandas_types():
    """A NULL PyTorch start is "no dispatch" in a text column (torch_npu's PYTORCH_API) or an
    all-NULL one, but counts as dispatched in an integer column (NaN is truthy), with pytorch_end 0."""
    text = [link(0, 100, 10, 20, "5", "8"), link(200, 300, 150, 160, None, None), link(400, 500, 1, 2, "9", "9")]
    assert classify(100, 200, text)["reason"] == af.SKIP_NO_DISPATCH
    integer = [link(0, 100, 10, 20, 5, 8), link(200, 300, 150, 160, None, None), link(400, 500, 1, 2, 9, 9)]
    r = classify(100, 200, integer)
    assert r["cause"] in (af.PYTORCH_IDLE, af.CANN_LAUNCH) and r["pytorch_idle_us"] == -0.008
    assert r["zeroed_links"] == "next.pytorch_end"
    all_null = [link(0, 100, 10, 20), link(200, 300, 150, 160)]
    assert classify(100, 200, all_null)["reason"] == af.SKIP_NO_DISPATCH


def test_wait_threshold_boundary():
    """next_wait - prev_wait < 50 us: PyTorch idle; exactly 50 us: CANN (recipe:154)."""
    th = af.DIFF_WAIT_THRESHOLD_NS
    assert th == 50_000
    r = classify(0, 1_000_000, pair(1_000, 1_000 + th - 1))
    assert r["cause"] == af.PYTORCH_IDLE
    assert r["reason"] == "Idle Pytorch layer: no task dispatched in 890.0 us"
    assert r["pytorch_idle_us"] == 890.0
    r = classify(0, 1_000_000, pair(1_000, 1_000 + th))
    assert r["cause"] == af.CANN_LAUNCH
    # a negative difference (the next launch quicker) is PyTorch idle too
    assert classify(0, 1_000_000, pair(60_000, 0))["cause"] == af.PYTORCH_IDLE


def test_cann_branches():
    # the gap between the launches the longest -> "long time between two node@launch"
    links = pair(1_000, 200_000, prev_launch=2_000, next_launch=3_000)
    r = classify(0, 1_000_000, links)
    p, n = af.normalise_links(links, False)
    gap = n["cann_ts"] - p["cann_end"]
    assert gap > 3_000
    assert r["reason"] == f"Abnormal CANN layer: long time between two node@launch {round(gap * 0.001, 3)} us"
    assert r["cann_idle_us"] == round((n["cann_end"] - p["cann_end"]) * 0.001, 3)
    # a launch longer than the gap -> "long node@launch" with the longer launch
    links = pair(1_000, 100_000, prev_launch=2_000, next_launch=5_000, gap=4_999)
    r = classify(0, 1_000_000, links)
    assert r["reason"] == "Abnormal CANN layer: long node@launch 5.0 us"
    # a tie between the gap and a launch: the gap's text (max == gap is tested first)
    links = pair(1_000, 100_000, prev_launch=2_000, next_launch=5_000, gap=5_000)
    assert classify(0, 1_000_000, links)["reason"] == "Abnormal CANN layer: long time between two node@launch 5.0 us"


def test_prev_next_ties_and_float_columns():
    # two tasks ending at the same time: the later row is prev; two starting together: the earlier is next
    links = [link(0, 100, 1, 2, 1, 10, "A"), link(50, 100, 3, 4, 1, 20, "B"),
             link(200, 300, 150, 160, 2, 140, "C"), link(200, 250, 170, 180, 2, 999_999, "D")]
    r = classify(100, 200, links)
    assert r["pytorch_idle_us"] == 0.12 and r["cann_idle_us"] == 0.156
    # a column holding a NULL goes through float64 (msprof_float): absolute ns lose their low bits
    big = 1_736_407_067_953_729_396
    rows = af.normalise_links([link(big, big, big + 1, big + 3, "1", str(big + 5)), link(1, 2)])
    assert rows[0]["cann_ts"] == int(float(big + 1)) != big + 1 and rows[0]["task_ts"] == big
    assert af.normalise_links([link(big, big, big + 1, big + 3, "1", str(big + 5)), link(1, 2)], False)[0]["cann_ts"] == big + 1


def test_units_and_text():
    assert af.ns_to_us(1_234_567) == 1234.567 and af.ns_to_us(None) is None
    assert af.ns_to_us_text(1_736_407_067_953_729_396) == "1736407067953729.396"
    assert af.ns_to_us_text(1_500) == "1.5" and af.ns_to_us_text(2_000) == "2"


def test_free_rows_without_links_or_gaps():
    assert af.free_rows([(0, 10), (20, 30)], [], 10)[0] == []         # no link rows: none (recipe:234)
    rows, totals = af.free_rows([(0, 10)], [link(0, 10)], 10)
    assert rows == [] and totals["n_free"] == 0 and totals["free_us"] == 0.0


# ------------------------------------------------------------------------------- the db entry point


def make_db(path: Path, tables: tuple[str, ...] = ("TASK", "COMPUTE_TASK_INFO", "COMMUNICATION_OP", "CANN_API",
                                                   "PYTORCH_API", "CONNECTION_IDS", "STRING_IDS")) -> Path:
    """A tiny torch_npu-shaped db: compute tasks [0, 100], [300, 400], a collective [400, 500], a
    copy inside nothing; each task launched by CANN and a PyTorch op (text times, as torch_npu)."""
    con = sqlite3.connect(path)
    ddl = {"TASK": "startNs INTEGER, endNs INTEGER, connectionId INTEGER, globalTaskId INTEGER, taskType INTEGER",
           "COMPUTE_TASK_INFO": "globalTaskId INTEGER PRIMARY KEY",
           "COMMUNICATION_OP": "startNs INTEGER, endNs INTEGER",
           "CANN_API": "startNs INTEGER, endNs INTEGER, connectionId INTEGER PRIMARY KEY",
           "PYTORCH_API": "startNs TEXT, endNs TEXT, connectionId INTEGER",
           "CONNECTION_IDS": "id INTEGER, connectionId INTEGER",
           "STRING_IDS": "id INTEGER PRIMARY KEY, value TEXT"}
    for t in tables:
        con.execute(f"CREATE TABLE {t} ({ddl[t]})")
    data = {"TASK": [(0, 100, 1, 1, 1), (300, 400, 2, 2, 1)], "COMPUTE_TASK_INFO": [(1,), (2,)],
            "COMMUNICATION_OP": [(400, 500)], "CANN_API": [(-50, -40, 1), (-30, 290, 2)],
            "PYTORCH_API": [("-90", "-60", 0), ("-60", "-35", 1)], "CONNECTION_IDS": [(0, 1), (1, 2)],
            "STRING_IDS": [(1, "KERNEL_AIVEC")]}
    for t in tables:
        con.executemany(f"INSERT INTO {t} VALUES ({', '.join('?' * len(data[t][0]))})", data[t])
    con.commit()
    con.close()
    return path


def test_capture_free_on_a_small_db(tmp_path):
    b = capture_free(make_db(tmp_path / "ascend_pytorch_profiler_0.db"), 5)
    assert b["warnings"] == [] and b["n_busy"] == 2 and b["n_free"] == 1 and b["free_us"] == 0.2
    assert b["window_us"] == 0.5 and b["source"].startswith("ascend_pytorch_profiler_0.db: TASK")
    (r,) = b["rows"]
    assert (r["start_time"], r["end_time"], r["duration_us"]) == ("0.1", "0.3", 0.2)
    # waits: prev launch at -50 after its op's end -60 (10 ns), next at -30 after -35 (5 ns): PyTorch idle
    assert r["cause"] == af.PYTORCH_IDLE and r["pytorch_idle_us"] == 0.025 and r["cann_idle_us"] == 0.33
    assert r["reason"] == "Idle Pytorch layer: no task dispatched in 0.025 us" and r["zeroed_links"] is None
    # the row model reads the block
    summary = {"captures": [{"path": "p", "rank": 0, "ascend_free": b}]}
    (row,) = af.ASCEND_FREE.rows(summary)
    assert row["rank"] == 0 and row["reason"] == r["reason"] and set(af.ASCEND_FREE.names) <= set(row)


def test_capture_free_incomplete_dbs(tmp_path):
    # no collective table: the compute tasks alone, and a warning (msprof-analyze writes nothing)
    d = tmp_path / "a"
    d.mkdir()
    b = capture_free(make_db(d / "x.db", ("TASK", "COMPUTE_TASK_INFO", "CANN_API", "PYTORCH_API",
                                            "CONNECTION_IDS", "STRING_IDS")))
    assert len(b["rows"]) == 1 and "no COMMUNICATION_OP table" in b["warnings"][0]
    # a link table missing: no rows, a warning
    b = capture_free(make_db(tmp_path / "y.db", ("TASK", "COMPUTE_TASK_INFO", "COMMUNICATION_OP")))
    assert b["rows"] == [] and "no CANN_API, STRING_IDS, CONNECTION_IDS, PYTORCH_API table" in b["warnings"][0]
    with pytest.raises(ValueError, match="no CANN_API"):
        fdb.read_task_links(tmp_path / "y.db")
    # no device tasks at all: nothing to say
    assert capture_free(make_db(tmp_path / "z.db", ("PYTORCH_API",))) is None
    with pytest.raises(ValueError, match="no TASK, COMPUTE_TASK_INFO"):
        fdb.read_busy_intervals(tmp_path / "z.db")
    # not a db / no file: a warning, never an exception from the entry point; OSError from the reader
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not sqlite" * 100)
    assert "not a readable sqlite db" in capture_free(junk)["warnings"][0]
    assert "no such db file" in capture_free(tmp_path / "missing.db")["warnings"][0]
    with pytest.raises(OSError):
        fdb.read_busy_intervals(tmp_path / "missing.db")


def test_an_infinite_time_in_the_db_is_no_crash(ascend_sets, tmp_path):
    import sqlite3

    src = rank_dbs(ascend_sets("db_l1"))[0]
    db = tmp_path / src.name
    shutil.copy(src, db)
    con = sqlite3.connect(db)
    con.execute("UPDATE TASK SET endNs = 1e999 WHERE rowid = (SELECT MIN(rowid) FROM TASK)")   # a REAL inf
    con.execute("UPDATE CANN_API SET startNs = 'junk' WHERE rowid = (SELECT MIN(rowid) FROM CANN_API)")
    con.commit()
    con.close()
    block = capture_free(db)
    assert block is not None and block["rows"]          # the rest is analysed
