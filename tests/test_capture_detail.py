"""Cluster scale, the second step: above formats.INLINE_DETAIL_MAX captures, each capture's top lists
and collective blocks (formats.DETAIL_KEYS) go to its capture_totals.jsonl line with its totals, so
that summary.json stays small at 10,000 ranks. The threshold is lowered here (inline_detail_max=1)
so that real captures exercise it: the outputs, once loaded, must give every row the inline
analysis gives, and a lost line must cost only that capture's detail."""
from __future__ import annotations

import logging
import shutil

import orjson
import pytest

import ascend_data
from mindspeed_profiler import RunAnalysis
from mindspeed_profiler.core import formats
from mindspeed_profiler.analysis.models import questions as q
from mindspeed_profiler.analysis.analyzers.compare import compare
from mindspeed_profiler.analysis.pipeline.batch import analyse_directory
from mindspeed_profiler.analysis.results.outputs import load_summary

VOLATILE = {"created", "elapsed_s", "analyse_s", "root", "totals"}


def _strip(v):
    if isinstance(v, dict):
        return {k: _strip(x) for k, x in v.items() if k not in VOLATILE}
    if isinstance(v, list):
        return [_strip(x) for x in v]
    return v


@pytest.fixture(scope="module", params=["kineto", "db_l0"])
def moved(request, tmp_path_factory, shared_data, ascend_sets):
    """A real capture set analysed twice: with its detail moved (threshold 1) and with the default."""
    src = shared_data / "kineto" if request.param == "kineto" else ascend_sets(request.param)
    base = tmp_path_factory.mktemp(f"detail_{request.param}")
    d = ascend_data.writable_copy(request.param, base / "run") if request.param != "kineto" else base / "run"
    if request.param == "kineto":
        shutil.copytree(src, d)
    export = "db" if request.param != "kineto" else "text"
    summary, code = analyse_directory(d, jobs=1, export_type=export, progress=False, html=True,
                                      out_dir=base / "moved", inline_detail_max=1)
    assert code == 0
    inline, code = analyse_directory(d, jobs=1, export_type=export, progress=False, html=False,
                                     out_dir=base / "inline")
    assert code == 0
    return base, summary, inline


def test_detail_is_in_the_totals_file_not_in_summary_json(moved):
    base, summary, _ = moved
    on_disk = orjson.loads((base / "moved" / formats.SUMMARY_FILE).read_bytes())
    data = (base / "moved" / formats.CAPTURE_TOTALS_FILE).read_bytes()
    n = 0
    for c, full in zip(on_disk["captures"], summary["captures"]):
        ref = c.get("totals")
        if not ref:
            continue
        detail = ref.get("detail", [])
        assert detail == [k for k in formats.DETAIL_KEYS if k in full], c["path"]
        assert not set(detail) & set(c), c["path"]
        line = orjson.loads(data[ref["offset"]:ref["offset"] + ref["bytes"]])
        for k in detail:
            assert line[k] == orjson.loads(orjson.dumps(full[k], option=orjson.OPT_SERIALIZE_NUMPY)), (c["path"], k)
        n += len(detail)
    assert n >= 3   # real detail moved: top lists at least
    below = (base / "inline" / formats.SUMMARY_FILE).stat().st_size
    assert (base / "moved" / formats.SUMMARY_FILE).stat().st_size < below


def test_loaded_it_gives_every_row_the_inline_analysis_gives(moved):
    base, _, _ = moved
    a, b = load_summary(base / "inline" / formats.SUMMARY_FILE), load_summary(base / "moved" / formats.SUMMARY_FILE)
    assert _strip(a["captures"]) == _strip(b["captures"])
    n = 0
    for m in q.MODELS:
        rows = _strip(list(m.rows(b)))
        assert rows == _strip(list(m.rows(a))), m.table
        n += len(rows)
    assert n > 100
    ra = RunAnalysis(base / "moved" / formats.SUMMARY_FILE)
    assert ra.kernels() and _strip(ra.kernels()) == _strip(RunAnalysis(base / "inline" / formats.SUMMARY_FILE).kernels())
    assert _strip(compare(ra.summary, a)) == _strip(compare(a, a))


def test_a_lost_line_costs_only_that_captures_detail(moved, tmp_path, caplog):
    base, summary, _ = moved
    work = tmp_path / "analysis"
    shutil.copytree(base / "moved", work)
    s = orjson.loads((work / formats.SUMMARY_FILE).read_bytes())
    victim = max((c for c in s["captures"] if c.get("totals")), key=lambda c: c["totals"]["bytes"])
    data = bytearray((work / formats.CAPTURE_TOTALS_FILE).read_bytes())
    data[victim["totals"]["offset"] + 3] = ord("#")
    (work / formats.CAPTURE_TOTALS_FILE).write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, logger="mindspeed_profiler"):
        loaded = load_summary(work / formats.SUMMARY_FILE)
    assert any(formats.CAPTURE_TOTALS_FILE in m and victim["path"] in m for m in caplog.messages)
    full = {c["path"]: c for c in summary["captures"]}
    for c in loaded["captures"]:
        for k in (c.get("totals") or {}).get("detail", []):
            assert (k in c) == (c["path"] != victim["path"]), (c["path"], k)
            if k in c:
                assert _strip(c[k]) == _strip(orjson.loads(orjson.dumps(full[c["path"]][k], option=orjson.OPT_SERIALIZE_NUMPY)))


def test_the_report_command_reads_the_moved_detail(moved):
    """`report` on the outputs writes the report the analysis wrote (it reads the detail back)."""
    import argparse

    from mindspeed_profiler.commands.report import run

    base, _, _ = moved
    written = (base / "moved" / formats.REPORT_FILE).read_text()
    (base / "moved" / formats.REPORT_FILE).unlink()   # in place: its links are relative to it
    assert run(argparse.Namespace(directory=str(base / "moved"), reanalyse=False, jobs=None)) == 0
    html = (base / "moved" / formats.REPORT_FILE).read_text()
    assert "Top kernels by device time" in html or "Top ops" in html
    assert html == written
