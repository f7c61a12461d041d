"""RunAnalysis: one method per question over a run's analysis, plain rows, `.to_pandas()`."""
from __future__ import annotations

import shutil
import sys

import pytest

from mindspeed_profiler import RunAnalysis
from mindspeed_profiler.analysis import Rows
from mindspeed_profiler.analysis.pipeline.batch import analyse_directory
from conftest import SHARED_DATA


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    if not SHARED_DATA.is_dir():
        pytest.skip(f"sample data not found at {SHARED_DATA}")
    root = tmp_path_factory.mktemp("run")
    shutil.copytree(SHARED_DATA, root, dirs_exist_ok=True)
    return root


def test_reads_the_summary_or_analyses_without_writing(run):
    fresh = RunAnalysis(run)                  # no summary yet: analysed in memory, nothing written
    assert not (run / "analysis").exists()
    summary, _ = analyse_directory(run, jobs=1, progress=False)
    saved = RunAnalysis(run)                  # now read from analysis/summary.json
    assert saved.summary["created"] == summary["created"]
    timing = lambda rows: [{k: v for k, v in r.items() if k != "analyse_s"} for r in rows]   # noqa: E731
    assert timing(fresh.captures()) == timing(saved.captures())   # the same rows but the time each took


def test_one_method_per_question(run):
    ra = RunAnalysis(run, reanalyse=True)
    caps = ra.captures()
    assert isinstance(caps, Rows) and len(caps) == 5 and all(r["status"] == "ok" for r in caps)
    by_path = {c["path"]: c for c in ra.summary["captures"]}
    bd = {r["path"]: r for r in ra.breakdown()}
    gpu = by_path["kineto/gpu_rank0.json.gz"]["device"]
    assert bd["kineto/gpu_rank0.json.gz"]["busy_us"] == gpu["busy_us"]
    comm = {r["path"]: r for r in ra.communication()}["kineto/gpu_rank0.json.gz"]
    assert comm["exposed_us"] == gpu["communication_exposed_us"]
    assert comm["exposed_share_of_busy"] == pytest.approx(gpu["communication_exposed_us"] / gpu["busy_us"])
    ops = ra.top_ops()
    assert {"path", "role", "rank", "stage", "name", "self_us"} <= set(ops[0])
    assert len(ops) == sum(len(c.get("top_ops") or []) for c in by_path.values())
    assert len(ra.kernels()) == sum(len(c.get("top_kernels") or []) for c in by_path.values())
    assert [r["step"] for r in ra.steps() if r["path"] == "kineto/gpu_rank0.json.gz"] == \
        [s["step"] for s in by_path["kineto/gpu_rank0.json.gz"]["steps"]]
    assert [{k: r[k] for k in s} for r, s in zip(ra.cross_rank(), ra.summary["stage_rank"])] == ra.summary["stage_rank"]
    assert all(r["flagged"] for r in ra.slow_ranks(flagged_only=True))
    assert ra.iterations() == [] and ra.critical_path() == []   # no timeline in this data
    diff = ra.compare(ra)
    assert all(r["delta_us"] in (0.0, None) for r in diff["ops"])


def test_timeline_questions(tmp_path):
    from test_analysis_timeline import trace   # a two-iteration timeline with known numbers
    import json
    (tmp_path / "timeline").mkdir()
    (tmp_path / "timeline" / "timeline.json").write_text(json.dumps(trace()))
    ra = RunAnalysis(tmp_path)
    its = ra.iterations()
    assert [r["iteration"] for r in its] == [1, 2]
    assert {(r["iteration"], r["stage"]) for r in ra.stages()} >= {(1, "actor_update"), (2, "actor_update")}
    cp = ra.critical_path()
    assert [r["position"] for r in cp if r["iteration"] == 1] == list(range(sum(r["iteration"] == 1 for r in cp)))


def test_to_pandas(run, monkeypatch):
    ra = RunAnalysis(run, reanalyse=True)
    pd = pytest.importorskip("pandas")
    df = ra.top_ops().to_pandas()
    assert isinstance(df, pd.DataFrame) and len(df) == len(ra.top_ops()) and "self_us" in df.columns
    monkeypatch.setitem(sys.modules, "pandas", None)   # pandas is optional: a clear message without it
    with pytest.raises(ImportError, match="pip install pandas"):
        ra.top_ops().to_pandas()


def test_step_breakdown_of_ascend_captures_and_cluster_rows(ascend_sets):
    ra = RunAnalysis(ascend_sets("pp4_l2"), reanalyse=True)
    rows = ra.step_breakdown()
    assert [(r["rank"], r["device_id"], r["step"], r["source"]) for r in sorted(rows, key=lambda r: r["rank"])] == \
        [(0, 0, 13, "step_trace_time.csv"), (1, 1, 13, "step_trace_time.csv"), (2, 4, 13, "step_trace_time.csv"),
         (3, 5, 13, "step_trace_time.csv")]
    by_rank = {c["rank"]: c["step_trace"][0] for c in ra.summary["captures"]}
    assert all(r["computing_us"] == by_rank[r["rank"]]["computing_us"] for r in rows)
    cluster = RunAnalysis(ascend_sets("gpt3_cluster16") / "cluster_analysis_output", reanalyse=True).step_breakdown()
    assert len(cluster) == 16 and {r["source"] for r in cluster} == {"cluster"}
