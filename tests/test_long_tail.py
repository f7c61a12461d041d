"""The long tail of the rollout (analyzers/long_tail.py, inputs/samples.py): on sample files written
in docs/rollout.md's format, the figures equal a recomputation from the raw JSON lines (json, not
our reader) by the definitions of docs/rollout.md "The long tail: definitions"; `python -m
mindspeed_profiler.analyse DIR --export-type db` run in-process gives the analysis.db tables and
the RunAnalysis methods; corrupt lines and samples without times are reported, never fatal."""
from __future__ import annotations

import json
import math
import sqlite3

import pytest

from mindspeed_profiler.analysis.analyzers.long_tail import (
    MAX_CURVE_POINTS,
    ROLLOUT_BATCHES,
    downsample,
    long_tail,
    occupancy_points,
)
from mindspeed_profiler.analysis.parsing.samples import read_samples
from mindspeed_profiler.analysis.pipeline.batch import analyse_directory
from mindspeed_profiler.analysis.results.facade import RunAnalysis
from mindspeed_profiler.core import formats
from samples_testutil import long_tail_batch, rollout_run, sample, uniform_batch, write_worker


def recompute(samples_dir) -> dict:
    """(iteration, stage) -> the definitions of docs/rollout.md, from the raw lines (json.loads, no
    code of the package): N timed, W, t50 / t90 / t100, mean occupancy, tail_lost_s."""
    by: dict = {}
    for path in sorted(samples_dir.glob("*_rank*.jsonl")):
        for line in path.read_text().splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if rec.get("type") == "sample":
                by.setdefault((rec["iteration"], rec["stage"]), []).append(rec)
    out = {}
    for key, recs in by.items():
        timed = [(r["start_ns"], r["end_ns"]) for r in recs if r.get("problem") is None
                 and isinstance(r.get("start_ns"), int) and isinstance(r.get("end_ns"), int) and r["end_ns"] >= r["start_ns"]]
        n, t0 = len(timed), min(a for a, _ in timed)
        w = max(b for _, b in timed) - t0
        ends = sorted(b - t0 for _, b in timed)
        busy = sum(b - a for a, b in timed)
        out[key] = {"timed": n, "untimed": len(recs) - n, "window_s": w / 1e9,
                    **{f"t{round(100 * q)}_s": ends[math.ceil(q * n) - 1] / 1e9 for q in (0.5, 0.9, 1.0)},
                    "mean_occupancy": busy / (n * w), "tail_lost_s": (w - busy / n) / 1e9}
    return out


def test_the_figures_equal_a_recomputation_from_the_raw_lines(tmp_path):
    rollout_run(tmp_path)
    summary, code = analyse_directory(tmp_path, jobs=1, html=False, write=False, progress=False)
    assert code == 0
    want = recompute(tmp_path / formats.SAMPLES_DIR)
    got = {(r["iteration"], r["stage"]): r for r in ROLLOUT_BATCHES.rows(summary)}
    assert set(got) == set(want) == {(1, "actor_generate"), (2, "actor_generate")}
    for key, w in want.items():
        for k, v in w.items():
            assert got[key][k] == pytest.approx(v, rel=1e-12), (key, k)
    # iteration 1: 2 workers x (14 samples of 10 ms + 2 of 80 ms) and one untimed sample each
    assert got[(1, "actor_generate")]["tail_lost_s"] == pytest.approx(0.080 - (28 * 0.010 + 4 * 0.080) / 32)
    assert got[(1, "actor_generate")]["untimed"] == 2 and got[(1, "actor_generate")]["workers"] == 2


def test_grpo_like_batch_one_sample_in_k_runs_to_t_tokens(tmp_path):
    """One sample in K = 8 runs to T = 256 tokens (one token per ms), the others stop after 4: most
    of the capacity is lost to the tail, and the numbers say so."""
    batch = [sample(i, 0, 256 if i % 8 == 7 else 4, 256 if i % 8 == 7 else 4, "length" if i % 8 == 7 else "stop")
             for i in range(32)]
    path = write_worker(tmp_path, "actor", 0, [(1, "actor_generate", batch)])
    r, = long_tail(read_samples(path).samples, 3)["batches"]
    assert (r["t50_s"], r["t90_s"], r["t100_s"]) == (0.004, 0.256, 0.256)
    assert r["mean_occupancy"] == pytest.approx((28 * 4 + 4 * 256) / (32 * 256))
    assert r["tokens_p50"] == 4 and r["tokens_max"] == 256 and r["truncated_share"] == 4 / 32


def test_occupancy_curve_and_its_bound():
    spans = [(0, 10), (0, 20), (5, 20), (20, 30)]   # the third starts as the first runs; the fourth as two end
    assert occupancy_points(spans) == [(0, 2), (5, 3), (10, 2), (20, 1), (30, 0)]
    many = [(i, 10_000 + 3 * i) for i in range(1000)]
    pts = occupancy_points(many)
    small = downsample(pts)
    assert len(pts) > MAX_CURVE_POINTS and len(small) == MAX_CURVE_POINTS and small[-1] == (pts[-1][0], 0.0)
    # the area under the curve (sum of the samples' durations) is kept by the time-weighted bins
    area = sum(r * (t2 - t) for (t, r), (t2, _) in zip(pts, pts[1:]))
    width = pts[-1][0] / (MAX_CURVE_POINTS - 1)
    assert sum(r for _, r in small[:-1]) * width == pytest.approx(area, rel=1e-9)
    assert area == sum(b - a for a, b in many)


def test_lengths_histogram_and_slowest(tmp_path):
    path = write_worker(tmp_path, "actor", 3, [(2, "actor_generate", uniform_batch(n=40))])
    rows = long_tail(read_samples(path).samples, 2)
    bins = rows["lengths"]
    assert [b["lo_tokens"] for b in bins][:3] == [0, 3, 6] and sum(b["count"] for b in bins) == 40
    assert all(b["hi_tokens"] - b["lo_tokens"] == 3 for b in bins) and bins[-1]["lo_tokens"] <= 40 < bins[-1]["hi_tokens"]
    slow = rows["slowest"]
    assert [s["sample_id"] for s in slow] == ["39", "38"] and slow[0]["worker"] == "actor:3"
    assert slow[0]["latency_s"] == pytest.approx(0.1) and slow[0]["ttft_s"] == pytest.approx(0.001)


def test_problem_samples_and_corrupt_lines_are_reported_not_fatal(tmp_path):
    batch = long_tail_batch(n=8) + [sample("bad", 50, 10, 7), sample("late", 0, 5, 9, problem="engine clock unknown")]
    write_worker(tmp_path, "actor", 0, [(1, "actor_generate", batch)], extra_lines=["{cut", "[]"])
    summary, code = analyse_directory(tmp_path, jobs=1, html=False, write=False, progress=False)
    cap, = [c for c in summary["captures"] if c["kind"] == "samples"]
    assert code == 0 and cap["status"] == "ok"
    r, = cap["rollout"]["batches"]
    assert (r["samples"], r["timed"], r["untimed"], r["known_lengths"]) == (10, 8, 2, 10)
    assert r["window_s"] == pytest.approx(0.08)   # the bad sample's 50 ms start is left out
    assert any("2 line(s) not read" in w for w in cap["warnings"])
    assert any("2 of 10 sample(s) with a problem" in w and "end_ns" in w for w in cap["warnings"])


def test_a_folder_of_only_corrupt_lines_fails_its_capture_only(tmp_path):
    d = tmp_path / formats.SAMPLES_DIR
    d.mkdir()
    (d / "actor_rank0.jsonl").write_text('{"type": "batch", "iteration": 1}\n{"type": "sample", broken\n')
    summary, _ = analyse_directory(tmp_path, jobs=1, html=False, write=False, progress=False)
    cap, = [c for c in summary["captures"] if c["kind"] == "samples"]
    assert cap["status"] == "failed" and "no sample records" in cap["error"]


def test_another_projects_rank_jsonl_is_not_taken(tmp_path):
    d = tmp_path / formats.SAMPLES_DIR
    d.mkdir()
    (d / "actor_rank0.jsonl").write_text('{"loss": 1.0}\n')
    summary, _ = analyse_directory(tmp_path, jobs=1, html=False, write=False, progress=False)
    assert not [c for c in summary["captures"] if c["kind"] == "samples"]


def test_runs_are_kept_apart_by_the_save_paths_run_id(tmp_path):
    for run in ("runA", "runB"):
        save = tmp_path / run
        write_worker(save, "actor", 0, [(1, "actor_generate", long_tail_batch(n=8))])
        (save / formats.RUN_FILE).write_text(json.dumps({"run_id": run}))
    summary, _ = analyse_directory(tmp_path, jobs=1, html=False, write=False, progress=False)
    assert sorted(r["run_id"] for r in ROLLOUT_BATCHES.rows(summary)) == ["runA", "runB"]


def test_analyse_command_in_process_gives_the_tables_and_methods(tmp_path, capsys):
    from mindspeed_profiler.analyse import main

    rollout_run(tmp_path)
    assert main([str(tmp_path), "--export-type", "db", "--top", "3", "--no-html"]) == 0
    out = capsys.readouterr().out
    assert "Rollout" in out and "actor_generate" in out
    db = sqlite3.connect(tmp_path / formats.ANALYSIS_DIR / formats.DB_FILE)
    try:
        n = {t: db.execute(f"select count(*) from {t}").fetchone()[0]
             for t in ("rollout_batches", "rollout_occupancy", "rollout_lengths", "rollout_slowest")}
        lost = dict(db.execute("select iteration, tail_lost_s from rollout_batches").fetchall())
    finally:
        db.close()
    assert n["rollout_batches"] == 2 and n["rollout_slowest"] == 2 * 3 and n["rollout_occupancy"] > 4 and n["rollout_lengths"] > 2
    ra = RunAnalysis(tmp_path)
    batches = ra.rollout_batches()
    assert [b["iteration"] for b in batches] == [1, 2] and lost[1] == pytest.approx(batches[0]["tail_lost_s"])
    assert len(ra.rollout_occupancy()) == n["rollout_occupancy"] and len(ra.rollout_lengths()) == n["rollout_lengths"]
    assert ra.rollout_slowest()[0]["latency_s"] == pytest.approx(0.08)
    ids = [f["id"] for f in ra.findings()]
    assert "long_tail_generation" in ids and "truncation" in ids


def test_summary_keys_of_the_samples_kind_are_documented(tmp_path, repo_root):
    """As tests/test_analysis_summary_docs.py does for the other kinds: every key the samples kind
    writes in summary.json is named in docs/analysis.md."""
    import re

    rollout_run(tmp_path)
    summary, _ = analyse_directory(tmp_path, jobs=1, html=False, write=False, progress=False)
    cap, = [c for c in summary["captures"] if c["kind"] == "samples"]
    doc = (repo_root / "docs" / "analysis.md").read_text()
    named = set(re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)", doc)) | set(re.findall(r"[{ ,]([a-z_]+)[,}]", doc))
    keys = set(cap) | set(cap["rollout"])
    for rows in cap["rollout"].values():
        for row in rows if isinstance(rows, list) else ():
            keys |= set(row)
    assert keys - named == set()


def test_untimed_only_batch_has_no_times(tmp_path):
    path = write_worker(tmp_path, "actor", 0, [(1, "actor_generate", [sample("a", 0, 0, 5, start_ns=None)])])
    r, = long_tail(read_samples(path).samples, 3)["batches"]
    assert (r["timed"], r["window_s"], r["tail_lost_s"], r["tokens_max"]) == (0, None, None, 5)

