"""Two runs written into one profile_save_path are never mixed: every capture and segment carries
its run's id; merge writes one timeline per run; the analysis says the directory holds several,
analyses each on its own, and `--run` picks one."""
from __future__ import annotations

import json

import pytest

from mindspeed_profiler import IntegratedProfiler, load_config, start_run
from mindspeed_profiler.analysis.pipeline.batch import RunNotFound, analyse_directory
from mindspeed_profiler.analysis.timeline.merge import write_timeline
from mindspeed_profiler.cli import main
from mindspeed_profiler.tracing import init_tracer, shutdown_tracer
from profiler_testutil import capture_dirs, meta_of, train


def one_run(root, iters: int) -> str:
    cfg = start_run(load_config({"integrated": {"profile": True, "profile_save_path": str(root), "backend": "torch",
                                                "stage": "actor_update", "profile_steps": [2]},
                                 "tracer": {"enable": True}}))
    init_tracer(cfg, role="actor", rank=0)
    try:
        train(IntegratedProfiler(cfg, role="actor", rank=0, world_size=1), iters)
    finally:
        shutdown_tracer()
    return cfg.run_id


@pytest.fixture
def two_runs(tmp_path, clean_state, monkeypatch):
    monkeypatch.delenv("MINDSPEED_PROFILER_RUN_ID", raising=False)
    a = one_run(tmp_path, 3)
    b = one_run(tmp_path, 5)
    return tmp_path, a, b


def test_every_capture_and_segment_knows_its_run(two_runs):
    root, a, b = two_runs
    assert a != b
    assert sorted(meta_of(d)["run_id"] for d in capture_dirs(root)) == sorted([a, b])
    headers = [json.loads(line) for f in (root / "timeline").glob("*.seg.jsonl")
               for line in f.read_text().splitlines() if '"type":"header"' in line.replace(" ", "")]
    assert sorted(h["run_id"] for h in headers) == sorted([a, b])   # one process id reused: one file, two sessions
    assert json.loads((root / "run.json").read_text())["run_id"] == b


def test_merge_writes_one_timeline_per_run(two_runs):
    root, a, b = two_runs
    latest = write_timeline(str(root / "timeline"))
    per_run = {rid: json.loads((root / "timeline" / f"timeline.{rid}.json").read_text()) for rid in (a, b)}
    assert json.loads(latest.read_text())["otherData"]["run_id"] == b
    for rid, iters in ((a, 3), (b, 5)):
        spans = [e for e in per_run[rid]["traceEvents"] if e.get("cat") == "iteration"]
        assert sorted(e["args"]["iteration"] for e in spans) == list(range(1, iters + 1))


def test_analysis_keeps_runs_apart(two_runs):
    root, a, b = two_runs
    summary, code = analyse_directory(root, jobs=1, progress=False, write=False)
    assert code == 0 and summary["runs"] == [a, b]
    assert any("2 runs" in w and "--run" in w for w in summary["warnings"])
    caps = [c for c in summary["captures"] if c["kind"] == "torch"]
    assert sorted(c["run_id"] for c in caps) == sorted([a, b])
    tl = next(c for c in summary["captures"] if c["kind"] == "timeline")
    assert [r["run_id"] for r in tl["timeline_runs"]] == [a, b]
    assert [r["n_iterations"] for r in tl["timeline_runs"]] == [3, 5]
    assert summary["timeline"]["n_iterations"] == 5   # the latest run's
    # no iteration spans two runs (the first run's iterations last ~ms, not the gap between the runs)
    assert max(it["dur_us"] for r in tl["timeline_runs"] for it in r["iterations"]) < 5e6
    assert {r["run_id"] for r in summary["stage_rank"]} == {a, b}


def test_run_picks_one(two_runs, capsys):
    root, a, b = two_runs
    summary, code = analyse_directory(root, jobs=1, progress=False, write=False, run=a)
    assert code == 0 and summary["runs"] == [a] and summary["warnings"] == []
    assert {c["run_id"] for c in summary["captures"]} == {a}
    assert summary["timeline"]["n_iterations"] == 3
    with pytest.raises(RunNotFound, match="runs found"):
        analyse_directory(root, jobs=1, progress=False, write=False, run="nope")
    assert main(["analyse", str(root), "--run", "nope", "-q"]) == 2
    assert "runs found" in capsys.readouterr().err
