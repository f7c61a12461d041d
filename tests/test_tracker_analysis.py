"""The analysis reads the metrics tracker's files (analysis/inputs/tracker.py): files written by
the real tracker (tests/test_metrics_tracker.py's loop of known sleeps) become tracker_metrics rows
equal to the lines on disk, in summary.json, RunAnalysis and analysis.db; the advisor's low_mfu rule
fires on them; a corrupt line is reported and the rest kept; another project's *_rank0.jsonl is not
taken for a tracker file."""
from __future__ import annotations

import json
import sqlite3

import pytest

from mindspeed_profiler import IntegratedProfiler
from mindspeed_profiler.core import formats
from mindspeed_profiler.analysis.analyzers import advisor
from mindspeed_profiler.analysis.pipeline.batch import analyse_directory
from mindspeed_profiler.analysis.results.facade import RunAnalysis
from test_metrics_tracker import N, metrics_cfg, rows_of, run_loop


@pytest.fixture
def tracked(tmp_path, clean_state):
    for rank in (0, 1):
        prof = IntegratedProfiler(metrics_cfg(tmp_path), role="actor", rank=rank, world_size=2)
        prof.set_model(parameters=N)
        run_loop(prof, 2)
    return tmp_path


def test_tracker_rows_equal_the_files_and_low_mfu_is_found(tracked):
    summary, code = analyse_directory(tracked, jobs=1, html=False, export_type="db", progress=False)
    assert code == 0
    caps = [c for c in summary["captures"] if c["kind"] == "tracker"]
    assert sorted((c["role"], c["rank"]) for c in caps) == [("actor", 0), ("actor", 1)]
    got = {(r["rank"], r["iteration"], r["metric"]): r["value"] for r in RunAnalysis.from_summary(summary).tracker_metrics()}
    want = {(rank, row["iteration"], k): v for rank in (0, 1)
            for row in rows_of(tracked / formats.METRICS_DIR / f"actor_rank{rank}.jsonl") for k, v in row.items()
            if k != "iteration"}
    assert got == want and len(got) > 20
    db = sqlite3.connect(tracked / formats.ANALYSIS_DIR / formats.DB_FILE)
    try:
        assert db.execute("select count(*) from tracker_metrics").fetchone()[0] == len(want)
    finally:
        db.close()
    # 100 x it tokens x 6 x 1 M parameters in ~30 ms against 2 TFLOPS: MFU 1-2%, far under LOW_MFU
    f, = [f for f in summary["findings"] if f["id"] == "low_mfu"]
    mfu = [r["value"] for r in RunAnalysis.from_summary(summary).tracker_metrics() if r["metric"] == "perf/mfu/actor_update"]
    assert f["evidence"]["mfu"] == pytest.approx(sum(mfu) / len(mfu)) and 0.005 < f["evidence"]["mfu"] < 0.03
    assert f["title"].startswith("actor actor_update: MFU ") and f["evidence"]["workers"] == 2
    share = f["evidence"]["stage_s"] / f["evidence"]["iteration_s"]
    assert 0.3 < share < 0.8 and f["impact"] == pytest.approx(share * (1 - f["evidence"]["mfu"] / advisor.LOW_MFU), abs=1e-4)


def test_a_corrupt_line_is_reported_and_the_others_kept(tracked):
    path = tracked / formats.METRICS_DIR / "actor_rank1.jsonl"
    lines = path.read_text().splitlines()
    path.write_text(lines[0] + "\n{not json\n" + "\n".join(lines[1:]) + "\n")
    summary, _ = analyse_directory(tracked, jobs=1, html=False, write=False, progress=False)
    cap, = [c for c in summary["captures"] if c["kind"] == "tracker" and c["rank"] == 1]
    assert cap["status"] == "ok" and cap["tracker"]["n_iterations"] == 2
    assert any("1 line(s) that are no iteration row" in w for w in cap["warnings"])


def test_another_projects_rank_jsonl_is_no_tracker_file(tmp_path):
    (tmp_path / "worker_rank0.jsonl").write_text(json.dumps({"step": 1, "loss": 0.5}) + "\n")
    summary, _ = analyse_directory(tmp_path, jobs=1, html=False, write=False, progress=False)
    assert not [c for c in summary["captures"] if c["kind"] == "tracker"]


def test_peak_tflops_recomputes_the_mfu(tracked, capsys):
    from test_metrics_tracker import PEAK

    plain, _ = analyse_directory(tracked, jobs=1, html=False, write=False, progress=False)
    again, _ = analyse_directory(tracked, jobs=1, html=False, write=False, progress=False, peak_tflops=4 * PEAK)

    def mfu(summary):
        return {(r["rank"], r["iteration"], r["metric"]): r["value"]
                for r in RunAnalysis.from_summary(summary).tracker_metrics()
                if r["metric"].startswith("perf/mfu/") or r["metric"] == "perf/peak_tflops"}
    before, after = mfu(plain), mfu(again)
    assert before.keys() == after.keys() and len(before) == 2 * 2 * 3   # 2 ranks x 2 iterations x (2 stages + peak)
    for k, v in before.items():
        assert after[k] == (4 * PEAK if k[2] == "perf/peak_tflops" else pytest.approx(v / 4, rel=1e-12))
    assert again["options"]["peak_tflops"] == 4 * PEAK and "peak_tflops" not in plain["options"]
    from mindspeed_profiler.commands.analyse import main
    for bad in ("0", "-1", "nan", "inf"):
        assert main([str(tracked), "--peak-tflops", bad, "-q", "--no-html"]) == 2
        assert f"--peak-tflops must be a positive number of TFLOPS, got {float(bad)}" in capsys.readouterr().err


def test_peak_tflops_says_which_iterations_it_could_not_recompute(tracked):
    path = tracked / formats.METRICS_DIR / "actor_rank0.jsonl"
    rows = rows_of(path)
    rows[0].pop("perf/model_parameters")        # as a tracker file from before the key was written
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    summary, _ = analyse_directory(tracked, jobs=1, html=False, write=False, progress=False, peak_tflops=8.0)
    cap, = [c for c in summary["captures"] if c["kind"] == "tracker" and c["rank"] == 0]
    assert any(w.startswith("--peak-tflops 8.0: 1 iteration(s) without") for w in cap["warnings"])
    kept = {r["metric"]: r["value"] for r in cap["tracker"]["rows"] if r["iteration"] == 1}
    assert kept["perf/mfu/actor_update"] == rows[0]["perf/mfu/actor_update"] and "perf/peak_tflops" in kept


def test_hostile_lines_are_left_out_not_fatal(tracked):
    path = tracked / formats.METRICS_DIR / "actor_rank0.jsonl"
    path.write_text(path.read_text() + "[" * 100_000 + "\n" + '{"iteration": 3, "timing_s/iteration": 1' + "0" * 400
                    + ', "perf/tokens": NaN}\n')
    summary, _ = analyse_directory(tracked, jobs=1, html=False, write=False, progress=False)
    cap, = [c for c in summary["captures"] if c["kind"] == "tracker" and c["rank"] == 0]
    assert cap["status"] == "ok" and cap["tracker"]["n_iterations"] == 3       # the deep line left out, counted
    assert not [r for r in cap["tracker"]["rows"] if r["iteration"] == 3]     # 1e400 and NaN are no values
