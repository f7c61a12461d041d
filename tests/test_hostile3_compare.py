"""compare, report and the advisor's findings as a user meets them (issue 31, items 10, 16, 17):
a summary.json of the wrong shape, two directories of raw Kineto traces, the same finding in
several captures."""
from __future__ import annotations

import argparse
import copy
import gzip
import json
import shutil
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from mindspeed_profiler.analysis.analyzers import advisor
from mindspeed_profiler.analysis.analyzers.compare import compare
from mindspeed_profiler.analysis.pipeline.batch import analyse_directory
from mindspeed_profiler.analysis.results.outputs import load_summary
from mindspeed_profiler.commands import compare as compare_cmd
from mindspeed_profiler.commands import report as report_cmd

REPO = Path(__file__).resolve().parents[1]
KINETO = Path("/work/shared/data/kineto")
RAW = KINETO / "gpu_rank0.json.gz"


def _raw_trace() -> Path:
    if not RAW.is_file():
        pytest.skip(f"{RAW} is not here")
    return RAW


# ------------------------------------------------------------------ item 10: summary.json of the wrong shape

@pytest.fixture(scope="module")
def good_summary(tmp_path_factory) -> dict:
    """A real summary.json (analysis of a real Kineto trace), as JSON."""
    d = tmp_path_factory.mktemp("good")
    shutil.copy(_raw_trace(), d / RAW.name)
    analyse_directory(d, jobs=1, progress=False, html=False)
    return json.loads((d / "analysis" / "summary.json").read_text())


def _damaged(good: dict) -> dict[str, tuple[object, str]]:
    """name -> (the summary.json content, a word the error must name: the field)."""
    out: dict[str, tuple[object, str]] = {
        "a list": ([1, 2], "expected an object"),
        "captures a number": ({"captures": 5}, "captures"),
        "a capture not a dict": ({**good, "captures": [5]}, "captures[0]"),
        "null counts": ({**good, "counts": None}, "counts"),
        "a timeline of numbers": ({**good, "timeline": {"iterations": [{"stages": 3}]}}, "iterations[0]"),
    }
    s = copy.deepcopy(good)
    s["captures"][0]["device"] = 5
    out["a number for the device block"] = (s, "device")
    s = copy.deepcopy(good)
    del s["captures"][0]["steps"][0]["dur_us"]
    out["a step without its duration"] = (s, "dur_us")
    s = copy.deepcopy(good)
    s["captures"][0]["top_ops"][0]["self_us"] = "slow"
    out["text for a time"] = (s, "self_us")
    s = copy.deepcopy(good)
    s["stage_rank"] = [{"source": "capture", "stage": "all", "rank": 0}]
    out["a stage_rank row without its value"] = (s, "value_us")
    return out


def _write(tmp_path: Path, name: str, content: object) -> Path:
    d = tmp_path / name.replace(" ", "_") / "analysis"
    d.mkdir(parents=True)
    (d / "summary.json").write_bytes(orjson.dumps(content))
    return d.parent


def test_a_summary_of_the_wrong_shape_is_a_clean_error_in_process(tmp_path, good_summary, capsys):
    good = _write(tmp_path, "good", good_summary)
    for name, (content, field) in _damaged(good_summary).items():
        run = _write(tmp_path, name, content)
        with pytest.raises(ValueError) as exc:
            load_summary(run / "analysis" / "summary.json")
        msg = str(exc.value)
        assert str(run / "analysis" / "summary.json") in msg and field in msg and "expected" in msg, (name, msg)
        capsys.readouterr()
        assert compare_cmd.run(argparse.Namespace(a=str(good), b=str(run), jobs=1, json_out=None, top=5)) == 1, name
        assert report_cmd.run(argparse.Namespace(directory=str(run), reanalyse=False, jobs=1)) == 1, name
        err = capsys.readouterr().err
        assert err.count(field) >= 2 and "summary.json" in err, (name, err)


def test_a_summary_of_the_wrong_shape_is_a_clean_error_through_the_cli(tmp_path, good_summary):
    good = _write(tmp_path, "good", good_summary)
    for name, (content, field) in _damaged(good_summary).items():
        run = _write(tmp_path, name, content)
        for argv in (["compare", str(good), str(run)], ["report", str(run)]):
            p = subprocess.run([sys.executable, "-m", "mindspeed_profiler.cli", *argv], cwd=REPO,
                               capture_output=True, text=True, timeout=120)
            assert p.returncode == 1, (name, argv, p.stderr)
            assert "Traceback" not in p.stderr and field in p.stderr and "summary.json" in p.stderr, (name, p.stderr)


def test_a_truncated_summary_names_its_file(tmp_path, good_summary):
    run = _write(tmp_path, "truncated", good_summary)
    f = run / "analysis" / "summary.json"
    f.write_bytes(f.read_bytes()[:500])
    with pytest.raises(ValueError, match="summary.json: not JSON"):
        load_summary(f)


# ------------------------------------------------------------------ item 16: compare of two runs of raw traces

AMD = REPO / "tests" / "data" / "hta" / "amd_trace" / "mi250_minitoy_train_ROCm6_2_kineto.json.gz"


def _slower_steps(src: Path, dst: Path, factor: float) -> None:
    """A copy of Kineto trace `src` whose ProfilerStep#N spans last `factor` times as long."""
    with gzip.open(src, "rt") as fh:
        trace = json.load(fh)
    for e in trace["traceEvents"]:
        if str(e.get("name", "")).startswith("ProfilerStep#") and "dur" in e:
            e["dur"] = e["dur"] * factor
    with gzip.open(dst, "wt") as fh:
        json.dump(trace, fh)


def test_compare_of_raw_traces_leads_with_step_time_per_worker_named_by_file(tmp_path):
    """Plain Kineto traces (no metadata, no rank): two files per run, one of them slower in B.
    compare leads with the step time of each worker, named by its file, and its change."""
    a, b = tmp_path / "a", tmp_path / "b"
    for d in (a, b):
        d.mkdir()
        shutil.copy(AMD, d / "trainer_one.pt.trace.json.gz")
    shutil.copy(AMD, a / "trainer_two.pt.trace.json.gz")
    _slower_steps(AMD, b / "trainer_two.pt.trace.json.gz", 2.0)
    p = subprocess.run([sys.executable, "-m", "mindspeed_profiler.cli", "compare", str(a), str(b), "--json", "-"],
                       cwd=REPO, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    res = json.loads(p.stdout)
    rows = {r["worker"]: r for r in res["steps"]}
    assert set(rows) == {"trainer_one", "trainer_two"}, res["steps"]
    assert rows["trainer_one"]["status"] == "same"
    two = rows["trainer_two"]
    assert two["ratio"] == pytest.approx(2.0, rel=0.01) and two["delta_us"] == pytest.approx(two["a_us"], rel=0.01)
    assert res["how"]["level"] == "rank"
    p = subprocess.run([sys.executable, "-m", "mindspeed_profiler.cli", "compare", str(a), str(b)],
                       cwd=REPO, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    titles = [i for i, line in enumerate(lines) if "B - A (ms)" in line]
    assert titles and "Step time" in lines[titles[0]], p.stdout   # the first table
    two_line, = [line for line in lines if "trainer_two / step time" in line]
    assert "2.000" in two_line and any("trainer_one / step time" in line for line in lines)


def test_a_worker_without_role_or_rank_is_named_by_its_file():
    from mindspeed_profiler.analysis.analyzers.compare import file_label

    assert file_label("kineto/worker0.1623143089861.pt.trace.json.gz") == "kineto/worker0.1623143089861"
    assert file_label("plain.json") == "plain"
    long = file_label("d/" + "x" * 200 + ".pt.trace.json.gz")
    assert len(long) <= 48 and long.startswith("d/x") and "…" in long


# ------------------------------------------------------------------ item 17: one finding per subject, not per capture

def _generate_capture(path: str, rank: int, host_wait_us: float) -> dict:
    row = {"device": "0", "stream": 7, "idle_us": 900.0, "host_wait_us": host_wait_us, "kernel_wait_us": 50.0,
           "other_us": 50.0}
    return {"path": path, "kind": "kineto", "status": "ok", "role": "actor", "rank": rank, "stage": "actor_generate",
            "wall_us": 1000.0, "idle_causes": [row]}


def test_the_same_host_bound_stage_in_two_captures_is_one_finding():
    caps = [_generate_capture("actor_generate/a", 0, 500.0), _generate_capture("actor_generate/b", 1, 700.0)]
    found = [f for f in advisor.findings({"captures": caps}) if f["id"] == "host_bound"]
    assert len(found) == 1, [f["title"] for f in found]
    f, = found
    assert "in 2 of 2 captures of actor_generate" in f["title"] and "rank 1" in f["title"]   # the worst's
    assert f["impact"] == pytest.approx(0.7) and f["evidence"]["path"] == "actor_generate/b"
    assert f["evidence"]["n_captures"] == 2 and f["evidence"]["of_captures"] == 2
    # a third capture of the stage that is not host bound: 2 of 3; another stage stays its own finding
    caps.append(_generate_capture("actor_generate/c", 2, 10.0))
    caps.append({**_generate_capture("actor_update/a", 0, 400.0), "stage": "actor_update"})
    found = {f["evidence"]["path"]: f["title"] for f in advisor.findings({"captures": caps}) if f["id"] == "host_bound"}
    assert set(found) == {"actor_generate/b", "actor_update/a"}
    assert "in 2 of 3 captures of actor_generate" in found["actor_generate/b"]
    assert "captures" not in found["actor_update/a"]   # actor_update's one capture: nothing to count


def test_real_host_bound_ranks_are_one_finding_through_the_report_and_the_db(tmp_path):
    """Two real GPU traces whose device waits on the host (/work/shared/data/kineto): one host_bound
    finding, in 2 of 2 captures, in summary.json, the terminal, report.html and analysis.db."""
    import sqlite3

    from mindspeed_profiler.analysis.results.facade import RunAnalysis

    for rank in (0, 1):
        src = KINETO / f"gpu_rank{rank}.json.gz"
        if not src.is_file():
            pytest.skip(f"{src} is not here")
        shutil.copy(src, tmp_path / src.name)
    summary, code = analyse_directory(tmp_path, jobs=1, progress=False, export_type="db")
    hb = [f for f in summary["findings"] if f["id"] == "host_bound"]
    assert len(hb) == 1 and "in 2 of 2 captures" in hb[0]["title"], [f["title"] for f in summary["findings"]]
    assert "in 2 of 2 captures" in (tmp_path / "analysis" / "report.html").read_text()
    ra = RunAnalysis(tmp_path)
    assert [f["title"] for f in ra.findings() if f["id"] == "host_bound"] == [hb[0]["title"]]
    db = next((tmp_path / "analysis").glob("*.db"))
    with sqlite3.connect(db) as con:
        titles = [t for (t,) in con.execute("SELECT title FROM findings WHERE id = 'host_bound'")]
    assert titles == [hb[0]["title"]]
