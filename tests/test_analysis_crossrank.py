"""Stage x rank rows and slow-rank flags (pure functions, hand-computed medians)."""
from __future__ import annotations

from mindspeed_profiler.analysis.analyzers.crossrank import slow_ranks, stage_rank_rows


def cap(path, rank, busy, steps=1, stage="actor_update", role="actor", status="ok", per_step=None):
    """A capture of `steps` steps whose device was busy `busy` us in all (per_step: each step's)."""
    per_step = per_step or [busy / steps] * steps
    return {"path": path, "kind": "torch", "status": status, "rank": rank, "role": role, "stage": stage,
            "steps": [{"step": k, "dur_us": 2 * v, "device_busy_us": v} for k, v in enumerate(per_step)],
            "device": {"busy_us": busy}, "wall_us": busy * 2}


def test_rows_are_medians_of_the_per_step_samples():
    caps = [cap("a", 0, 100), cap("b", 0, 300),          # rank 0: two one-step calls: samples 100, 300
            cap("c", 1, 200), cap("d", 2, 220), cap("e", 3, 600, steps=2),   # rank 3: 300 per step
            cap("f", 4, 9999, status="failed"),           # failed: ignored
            cap("g", 5, 50, stage="actor_generate")]      # alone in its stage: no ratio
    rows = stage_rank_rows(caps)
    vals = {(r["stage"], r["rank"]): (r["value_us"], r["n"], r["n_captures"]) for r in rows}
    assert vals == {("actor_update", 0): (200, 2, 2), ("actor_update", 1): (200, 1, 1), ("actor_update", 2): (220, 1, 1),
                    ("actor_update", 3): (300, 2, 1), ("actor_generate", 5): (50, 1, 1)}
    spread0 = next(r["spread_us"] for r in rows if r["rank"] == 0)
    assert spread0 == 1.4826 * 100                       # |100 - 200| = |300 - 200| = 100


def test_a_single_slow_sample_is_not_a_slow_rank():
    # one profiled call per rank; rank 3's took 6x longer: ratio above the threshold, but one sample is noise
    rows = stage_rank_rows([cap("a", 0, 7.5), cap("b", 1, 7.5), cap("c", 2, 8.0), cap("d", 3, 45.0)])
    sr = {r["rank"]: r for r in slow_ranks(rows, threshold=1.2)}
    assert sr[3]["ratio"] > 5 and not sr[3]["flagged"] and "1 sample" in sr[3]["reason"]


def test_flagged_with_enough_samples_above_noise():
    steady = [100, 101, 99, 100, 100]
    rows = stage_rank_rows([cap(str(r), r, sum(steady), steps=5, per_step=steady) for r in range(3)] +
                           [cap("slow", 3, 650, steps=5, per_step=[130, 131, 129, 130, 130]),
                            cap("noisy", 4, 650, steps=5, per_step=[40, 220, 130, 60, 200])])
    sr = {r["rank"]: r for r in slow_ranks(rows, threshold=1.2)}
    # median of 100, 100, 100, 130, 130 = 100; rank 3: 130 / 100 = 1.3, 30 us over it, noise ~1.5 us
    assert sr[3]["flagged"] and sr[3]["median_us"] == 100 and abs(sr[3]["ratio"] - 1.3) < 1e-12
    # rank 4: the same median (130) but its own samples spread ~100 us: not above noise
    assert not sr[4]["flagged"] and "noise" in sr[4]["reason"]
    assert not any(sr[r]["flagged"] for r in (0, 1, 2))


def test_timeline_medians_win_over_captures():
    tl = {"path": "timeline", "kind": "timeline", "status": "ok", "timeline": {"stage_worker": [
        {"stage": "actor_update", "worker": f"actor:{r}", "role": "actor", "rank": r, "count": 40,
         "median_us": 100.0 + (60 if r == 1 else 0), "spread_us": 2.0} for r in range(3)]}}
    steady = [10.0] * 5
    caps = [cap("a", 0, 50, steps=5, per_step=steady), cap("b", 1, 50, steps=5, per_step=steady),
            cap("c", 2, 250, steps=5, per_step=[50.0] * 5)]
    sr = slow_ranks(stage_rank_rows(caps + [tl]), threshold=1.2)
    flagged = [(r["source"], r["rank"]) for r in sr if r["flagged"]]
    assert flagged == [("timeline", "actor:1")]
    cap_row = next(r for r in sr if r["source"] == "capture" and r["rank"] == 2)
    assert cap_row["ratio"] == 5 and "timeline" in cap_row["reason"]


def test_cluster_rows_and_no_device_fallback():
    caps = [{"path": "x.csv", "kind": "cluster", "status": "ok",
             "ranks": [{"rank": 0, "computing_us": 10.0}, {"rank": 1, "computing_us": 30.0}]},
            {"path": "k", "kind": "kineto", "status": "ok", "rank": 7, "role": None, "stage": None,
             "steps": [], "device": None, "wall_us": 5.0}]
    rows = stage_rank_rows(caps)
    assert {(r["source"], r["rank"], r["metric"], r["value_us"]) for r in rows} == {
        ("cluster", 0, "computing_us", 10.0), ("cluster", 1, "computing_us", 30.0),
        ("capture", 7, "wall_us_per_capture", 5.0)}
    sr = slow_ranks(rows, threshold=1.2)
    assert [(r["rank"], r["ratio"], r["flagged"]) for r in sr] == [(1, 1.5, True), (0, 0.5, False)]
