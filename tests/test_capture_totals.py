"""Cluster scale: each capture's complete totals (op_totals, kernel_totals) live in
analysis/capture_totals.jsonl and analysis.db, not in summary.json; every reader finds them there,
and an older summary.json with the totals inline gives the same answers."""
from __future__ import annotations

import logging
import shutil
import sqlite3

import orjson
import pytest

from mindspeed_profiler import RunAnalysis
from mindspeed_profiler.core import formats
from mindspeed_profiler.analysis.analyzers.compare import compare
from mindspeed_profiler.analysis.pipeline.batch import analyse_directory
from mindspeed_profiler.analysis.results.outputs import TOTALS_KEYS, TotalsReader, load_summary, write_summary


@pytest.fixture(scope="module")
def analysed(tmp_path_factory, shared_data):
    """../shared/data/kineto analysed with the db export, and the same analysed in memory (inline totals)."""
    d = tmp_path_factory.mktemp("totals") / "run"
    shutil.copytree(shared_data / "kineto", d)
    summary, code = analyse_directory(d, jobs=1, export_type="db", progress=False, html=False)
    assert code == 0
    inline, _ = analyse_directory(d, jobs=1, progress=False, write=False)
    return d / formats.ANALYSIS_DIR, summary, inline


def _strip(s: dict) -> dict:
    vol = {"created", "elapsed_s", "analyse_s", "root"}
    walk = lambda v: ({k: walk(x) for k, x in v.items() if k not in vol} if isinstance(v, dict)
                      else [walk(x) for x in v] if isinstance(v, list) else v)
    return walk(dict(s))


def test_totals_are_in_the_file_and_the_db_not_in_summary_json(analysed):
    out, _, inline = analysed
    on_disk = orjson.loads((out / formats.SUMMARY_FILE).read_bytes())
    db = sqlite3.connect(out / formats.DB_FILE)
    lines = (out / formats.CAPTURE_TOTALS_FILE).read_bytes().splitlines()
    by_path = {c["path"]: c for c in inline["captures"]}
    assert len(lines) == sum(1 for c in on_disk["captures"] if "totals" in c) == 3
    for cid, c in enumerate(on_disk["captures"]):
        assert not set(TOTALS_KEYS) & set(c), c["path"]
        ref = c["totals"]
        line = orjson.loads((out / ref["file"]).read_bytes()[ref["offset"]:ref["offset"] + ref["bytes"]])
        assert line["path"] == c["path"]
        for key in TOTALS_KEYS:
            assert line[key] == by_path[c["path"]][key]
            assert db.execute(f"SELECT count(*) FROM {key} WHERE capture_id = ?", (cid,)).fetchone()[0] == len(line[key])
    assert any(len(orjson.loads(x)["kernel_totals"]) > 100 for x in lines)   # the GPU ranks: all their kernels
    refs = [c["totals"] for c in on_disk["captures"] if "totals" in c]   # in summary order, one after the other
    assert [r["offset"] for r in refs] == [sum(r["bytes"] for r in refs[:k]) for k in range(len(refs))]


def test_readers_give_the_same_rows_as_inline_totals(analysed):
    out, _, inline = analysed
    ra, ri = RunAnalysis(out.parent), RunAnalysis.from_summary(inline)
    assert ra.op_totals() and ra.op_totals() == ri.op_totals()
    assert ra.kernel_totals() and ra.kernel_totals() == ri.kernel_totals()
    assert _strip(compare(ra.summary, ra.summary)) == _strip(compare(inline, inline))
    assert _strip(compare(ra.summary, inline)) == _strip(compare(inline, inline))


def test_an_old_summary_with_inline_totals_still_loads(analysed, tmp_path):
    out, _, inline = analysed
    old = orjson.loads((out / formats.SUMMARY_FILE).read_bytes())
    with TotalsReader(load_summary(out / formats.SUMMARY_FILE)) as rd:
        for c in old["captures"]:
            ref = c.pop("totals")
            for k in TOTALS_KEYS:
                c[k] = rd.get({**c, "totals": ref}, k)
    (tmp_path / "analysis").mkdir()
    (tmp_path / "analysis" / formats.SUMMARY_FILE).write_bytes(orjson.dumps(old))   # no capture_totals.jsonl beside it
    ra = RunAnalysis(tmp_path)
    assert ra.op_totals() == RunAnalysis(out.parent).op_totals()
    assert _strip(compare(ra.summary, RunAnalysis(out.parent).summary)) == _strip(compare(inline, inline))


def test_a_corrupt_line_is_reported_and_the_other_captures_still_read(analysed, tmp_path, caplog):
    out, _, inline = analysed
    work = tmp_path / "analysis"
    shutil.copytree(out, work)
    s = load_summary(work / formats.SUMMARY_FILE)
    victim = max(s["captures"], key=lambda c: c["totals"]["bytes"])
    data = bytearray((work / formats.CAPTURE_TOTALS_FILE).read_bytes())
    data[victim["totals"]["offset"] + 5] = ord("#")
    (work / formats.CAPTURE_TOTALS_FILE).write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, logger="mindspeed_profiler"):
        rows = RunAnalysis(tmp_path).op_totals()
    others = {c["path"] for c in inline["captures"] if c.get("op_totals") and c["path"] != victim["path"]}
    assert others and {r["path"] for r in rows} == others
    assert any(formats.CAPTURE_TOTALS_FILE in m and victim["path"] in m for m in caplog.messages)
    res = compare(RunAnalysis(tmp_path).summary, RunAnalysis(out.parent).summary)   # compare still works
    assert res["ops"] and not res["nothing_comparable"]


def test_summary_json_is_written_piece_by_piece_as_one_indented_dump(analysed, tmp_path):
    out, _, inline = analysed
    s = orjson.loads((out / formats.SUMMARY_FILE).read_bytes())
    for summary in (s, dict(inline), {"captures": [], "warnings": []}, {}):
        write_summary(tmp_path / "s.json", summary)
        assert (tmp_path / "s.json").read_bytes() == orjson.dumps(
            summary, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS)


def test_nothing_is_left_behind_but_the_outputs(analysed):
    out, _, _ = analysed
    assert sorted(p.name for p in out.iterdir()) == sorted([formats.SUMMARY_FILE, formats.DB_FILE,
                                                           formats.CAPTURE_TOTALS_FILE])


def test_a_missing_totals_file_is_reported_and_the_rest_still_read(analysed, tmp_path, caplog):
    out, _, _ = analysed
    (tmp_path / "analysis").mkdir()
    shutil.copy(out / formats.SUMMARY_FILE, tmp_path / "analysis")   # summary.json alone
    with caplog.at_level(logging.WARNING, logger="mindspeed_profiler"):
        ra = RunAnalysis(tmp_path)
        assert ra.op_totals() == [] and ra.top_ops()   # the rest of the summary is there
    assert any(formats.CAPTURE_TOTALS_FILE in m and "cannot be read" in m for m in caplog.messages)


def test_totals_stay_inline_when_their_file_cannot_be_written(analysed, tmp_path, monkeypatch, shared_data):
    from mindspeed_profiler.analysis.results import outputs

    def refuse(self):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(outputs.TotalsSpool, "_open", refuse)
    shutil.copytree(shared_data / "kineto", tmp_path / "run")
    summary, code = analyse_directory(tmp_path / "run", jobs=1, progress=False, html=False)
    assert code == 0 and any("No space left" in w for w in summary["warnings"])
    on_disk = orjson.loads((tmp_path / "run" / "analysis" / formats.SUMMARY_FILE).read_bytes())
    assert all("totals" not in c and "op_totals" in c for c in on_disk["captures"])
    assert not (tmp_path / "run" / "analysis" / formats.CAPTURE_TOTALS_FILE).exists()
    assert RunAnalysis(tmp_path / "run").op_totals() == RunAnalysis.from_summary(analysed[2]).op_totals()
