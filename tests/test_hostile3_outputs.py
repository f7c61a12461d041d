"""The analysis' outputs and msprof-analyze's cluster db under hostile inputs (issue 31, items 4, 5
and 12): a lone surrogate or a number JSON cannot carry never loses summary.json,
capture_totals.jsonl, analysis.db or report.html; a rank that is none is a warning and the capture
is analysed; a damaged cluster_analysis.db is a warning and the csv beside it is still analysed."""
from __future__ import annotations

import gzip
import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from conftest import REPO_ROOT, SHARED_DATA
from mindspeed_profiler.analysis.results.outputs import TotalsReader, TotalsSpool, load_summary, write_summary
from mindspeed_profiler.cli import main

CLUSTER_OUTPUT = REPO_ROOT / "tests" / "data" / "ascend" / "msinsight_cluster" / "cluster_analysis_output"


def _trace() -> dict:
    return json.load(gzip.open(SHARED_DATA / "kineto" / "cpu_only_rank34.pt.trace.json.gz"))


def _analyse(root: Path) -> dict:
    """`analyse` with every output (analysis.db and report.html too); summary.json read back as
    strict UTF-8 JSON."""
    assert main(["analyse", str(root), "-q", "-j", "1", "--export-type", "db"]) == 0
    out = root / "analysis"
    assert (out / "analysis.db").is_file() and (out / "report.html").is_file()
    (out / "report.html").read_bytes().decode("utf-8")
    return json.loads((out / "summary.json").read_bytes().decode("utf-8"))


def _strings(v):
    """Every text in a JSON value, keys included."""
    if isinstance(v, str):
        yield v
    elif isinstance(v, dict):
        for k, x in v.items():
            yield str(k)
            yield from _strings(x)
    elif isinstance(v, list):
        for x in v:
            yield from _strings(x)


def _outputs_text(root: Path) -> set[str]:
    out = root / "analysis"
    found = set(_strings(json.loads((out / "summary.json").read_bytes().decode("utf-8"))))
    totals = out / "capture_totals.jsonl"
    if totals.exists():
        for line in totals.read_bytes().decode("utf-8").splitlines():
            found.update(_strings(json.loads(line)))
    return found


# -- item 4: lone surrogates from the lenient readers ------------------------------------------

def test_a_lone_surrogate_escape_in_a_tracker_line_reaches_the_outputs_as_text(tmp_path):
    """Python's json (the tracker reader) turns the escape "\\ud800" into a lone surrogate, which
    once crashed the summary writer (orjson: "surrogates not allowed") and lost every output."""
    (tmp_path / "metrics").mkdir()
    (tmp_path / "metrics" / "actor_rank0.jsonl").write_bytes(
        b'{"iteration": 1, "timing_s/iteration": 1.5, "timing_s/gen\\ud800": 0.5}\n'
        b'{"iteration": 2, "timing_s/iteration": 1.25, "timing_s/gen\\ud800": 0.25, "timing_s/x\xff": 1}\n')
    summary = _analyse(tmp_path)
    (c,) = summary["captures"]
    assert c["status"] == "ok" and c["kind"] == "tracker"
    metrics = {r["metric"] for r in c["tracker"]["rows"]}
    assert "timing_s/gen\\ud800" in metrics   # visible, as the escape's text
    assert "timing_s/x\ufffd" in metrics       # a byte that is not UTF-8: U+FFFD (the file is read with errors="replace")


def test_a_lone_surrogate_in_a_trace_read_leniently_reaches_the_outputs_as_text(tmp_path, shared_data):
    """A NaN sends the trace to Python's json, which makes an op name of "op\\ud800" a lone
    surrogate: summary.json and capture_totals.jsonl once failed on it."""
    t = _trace()
    t["traceEvents"][6]["name"] = "OP_NAME"          # a cpu_op
    t["traceEvents"][7]["dur"] = "NOT_A_NUMBER"
    text = json.dumps(t).replace('"OP_NAME"', '"op\\ud800"').replace('"NOT_A_NUMBER"', "NaN")
    (tmp_path / "t.pt.trace.json").write_text(text)
    summary = _analyse(tmp_path)
    (c,) = summary["captures"]
    assert c["status"] == "ok"
    assert "op\\ud800" in _outputs_text(tmp_path)


def test_the_outputs_writers_never_die_on_a_value_json_cannot_carry(tmp_path):
    """The one encoder of summary.json and capture_totals.jsonl: a lone surrogate (here a non-UTF-8
    file name through os.fsdecode) is written as its escape, an integer beyond 64 bits as a float,
    one beyond a float's range (10**400) and inf / nan as null; each kind is a warning naming where."""
    odd = {"path": "all/t\udcff.json", "rank": 10**400, "big": 2**70, "neg": -(10**400),
           "inf": float("inf"), "nan": float("nan"), "op_totals": [["aten::mm\ud800", 1, 2**80]], "kind": "torch", "status": "ok"}
    spool = TotalsSpool(tmp_path)
    res = spool.take({"capture": dict(odd)})
    spool.commit(tmp_path, [res["capture"]])
    write_summary(tmp_path / "summary.json", {"captures": [res["capture"]], "warnings": [], "k\udcff": 1})
    raw = json.loads((tmp_path / "summary.json").read_bytes().decode("utf-8"))
    c = raw["captures"][0]
    assert c["path"] == "all/t\\udcff.json" and c["rank"] is None and c["neg"] is None
    assert c["big"] == float(2**70) and c["inf"] is None and c["nan"] is None and raw["k\\udcff"] == 1
    ints, texts = raw["warnings"]
    assert ints.startswith("3 integer(s) beyond 64 bits") and "/captures/0/" in ints
    assert texts.startswith("2 text(s) with a lone surrogate") and "/captures/0/path" in texts
    # read back: the totals line is this capture's (its path escaped the same way)
    s = load_summary(tmp_path / "summary.json")
    with TotalsReader(s) as rd:
        assert rd.get(s["captures"][0], "op_totals") == [["aten::mm\\ud800", 1, float(2**80)]]


# -- item 5: a rank that is none ---------------------------------------------------------------

@pytest.mark.parametrize("rank", [10**400, -1, 2**40, "3", [1], True], ids=["1e400", "negative", "2**40", "text", "list", "bool"])
@pytest.mark.parametrize("lenient", [False, True], ids=["orjson", "with-nan"])
def test_a_rank_that_is_none_is_a_warning_and_the_capture_is_analysed(tmp_path, shared_data, rank, lenient):
    """distributedInfo.rank = 10**400 once crashed the summary writer (OverflowError) where a NaN
    sent the trace to Python's json, and failed the capture where it did not ("number is infinity
    when parsed as double"); any rank that is not an integer from 0 to 2**31 - 1 is now a warning
    naming the file and the value, and the capture's rank is unknown."""
    t = _trace()
    t["distributedInfo"]["rank"] = "RANK"
    if lenient:
        t["traceEvents"][7]["dur"] = "NOT_A_NUMBER"
    text = json.dumps(t).replace('"RANK"', json.dumps(rank)).replace('"NOT_A_NUMBER"', "NaN")
    (tmp_path / "t.pt.trace.json").write_text(text)
    summary = _analyse(tmp_path)
    (c,) = summary["captures"]
    assert c["status"] == "ok" and c["rank"] is None and c["distributed"]["rank"] is None
    assert c["n_events"] > 0 and c["distributed"]["world_size"] == 300
    (w,) = [w for w in c["warnings"] if "distributedInfo.rank" in w]
    assert w.startswith("t.pt.trace.json: distributedInfo.rank is ") and repr(rank)[:12] in w
    assert "not an integer from 0 to 2147483647" in w


def test_a_sane_rank_is_kept(tmp_path, shared_data):
    (tmp_path / "t.pt.trace.json").write_text(json.dumps(_trace()))
    (c,) = _analyse(tmp_path)["captures"]
    assert c["rank"] == 34 and not [w for w in c.get("warnings", []) if "distributedInfo" in w]


# -- item 12: a damaged cluster_analysis.db ----------------------------------------------------

def _cluster_db(path: Path) -> None:
    """A cluster_analysis.db as msprof-analyze writes it from db input (its ClusterStepTraceTime),
    with the rows of the real csv beside it, in small pages so that it spans many."""
    import csv
    rows = list(csv.DictReader(open(CLUSTER_OUTPUT / "cluster_step_trace_time.csv", encoding="utf-8")))
    cols = list(rows[0])
    con = sqlite3.connect(path)
    con.execute("PRAGMA page_size = 512")
    con.execute(f"CREATE TABLE ClusterStepTraceTime ({', '.join(repr(c.lower()) for c in cols)})")
    con.executemany(f"INSERT INTO ClusterStepTraceTime VALUES ({', '.join('?' * len(cols))})",
                    [tuple(r.values()) for r in rows * 20])
    con.commit()
    con.close()


def _garbage(db: Path) -> None:
    db.write_bytes(bytes(range(256)) * 20)


def _truncated(db: Path) -> None:
    _cluster_db(db)
    data = db.read_bytes()
    assert len(data) > 4096
    db.write_bytes(data[:1536])


def _other_tables(db: Path) -> None:
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE StepTraceTime (step, computing)")   # torch_npu's analysis.db, not msprof-analyze's
    con.commit()
    con.close()


def _header_only(db: Path) -> None:
    _cluster_db(db)
    db.write_bytes(db.read_bytes()[:100])


@pytest.mark.parametrize("damage", [_garbage, _truncated, _other_tables, _header_only],
                         ids=["garbage", "truncated", "other-tables", "header-only"])
def test_a_damaged_cluster_db_is_a_warning_and_the_csv_is_still_analysed(tmp_path, damage):
    """A damaged cluster_analysis.db once failed the whole cluster capture (sqlite3.DatabaseError
    was not one of the errors the reader reported), losing the good cluster_step_trace_time.csv."""
    out = tmp_path / "cluster_analysis_output"
    shutil.copytree(CLUSTER_OUTPUT, out)
    damage(out / "cluster_analysis.db")
    summary = _analyse(tmp_path)
    (c,) = summary["captures"]
    assert c["status"] == "ok" and c["kind"] == "cluster"
    assert len(c["ranks"]) == 16 and c["communication"] and c["groups"] is not None
    (w,) = [w for w in c["warnings"] if "cluster_analysis.db" in w]
    assert w.startswith("cluster_analysis.db: unreadable (")


def test_a_damaged_cluster_db_alone_fails_only_its_capture_saying_why(tmp_path, shared_data):
    (tmp_path / "cluster_analysis_output").mkdir()
    _garbage(tmp_path / "cluster_analysis_output" / "cluster_analysis.db")
    (tmp_path / "t.pt.trace.json").write_text(json.dumps(_trace()))
    assert main(["analyse", str(tmp_path), "-q", "-j", "1"]) == 1   # some failed
    caps = {c["kind"]: c for c in json.loads((tmp_path / "analysis" / "summary.json").read_text())["captures"]}
    assert caps["kineto"]["status"] == "ok"
    assert caps["cluster"]["status"] == "failed" and "cluster_analysis.db: unreadable (DatabaseError" in caps["cluster"]["error"]


def test_the_cluster_db_still_gives_what_the_csv_would(tmp_path):
    """The db alone (msprof-analyze's output from db input) is read as before."""
    (tmp_path / "cluster_analysis_output").mkdir()
    _cluster_db(tmp_path / "cluster_analysis_output" / "cluster_analysis.db")
    (c,) = _analyse(tmp_path)["captures"]
    assert c["status"] == "ok" and len(c["ranks"]) == 16 * 20 and c["warnings"] == []
