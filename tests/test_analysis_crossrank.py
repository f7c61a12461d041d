"""Stage x rank rows and slow-rank flags (pure functions, hand-computed medians)."""
from __future__ import annotations

from mindspeed_profiler.analysis.analyzers.crossrank import slow_ranks, stage_rank_rows


def cap(path, rank, busy, steps=1, stage="actor_update", role="actor", status="ok"):
    return {"path": path, "kind": "torch", "status": status, "rank": rank, "role": role, "stage": stage,
            "steps": [{}] * steps, "device": {"busy_us": busy}, "wall_us": busy * 2}


def test_captures_of_one_rank_are_averaged_then_compared():
    caps = [cap("a", 0, 100), cap("b", 0, 300),          # rank 0: two calls, mean 200
            cap("c", 1, 200), cap("d", 2, 220), cap("e", 3, 600, steps=2),   # rank 3: 300 per step
            cap("f", 4, 9999, status="failed"),           # failed: ignored
            cap("g", 5, 50, stage="actor_generate")]      # alone in its stage: no ratio
    rows = stage_rank_rows(caps)
    vals = {(r["stage"], r["rank"]): (r["value_us"], r["n"]) for r in rows}
    assert vals == {("actor_update", 0): (200, 2), ("actor_update", 1): (200, 1), ("actor_update", 2): (220, 1),
                    ("actor_update", 3): (300, 1), ("actor_generate", 5): (50, 1)}
    sr = slow_ranks(rows, threshold=1.2)
    # median of 200, 200, 220, 300 = 210; 300 / 210 = 1.43 > 1.2 flagged, 220 / 210 = 1.05 not
    assert [(r["rank"], r["flagged"]) for r in sr] == [(3, True), (2, False), (0, False), (1, False)]
    assert sr[0]["median_us"] == 210 and abs(sr[0]["ratio"] - 300 / 210) < 1e-12


def test_cluster_rows_and_no_device_fallback():
    caps = [{"path": "x.csv", "kind": "cluster", "status": "ok",
             "ranks": [{"rank": 0, "computing_us": 10.0}, {"rank": 1, "computing_us": 30.0}]},
            {"path": "k", "kind": "kineto", "status": "ok", "rank": 7, "role": None, "stage": None,
             "steps": [], "device": None, "wall_us": 5.0}]
    rows = stage_rank_rows(caps)
    assert {(r["source"], r["rank"], r["metric"], r["value_us"]) for r in rows} == {
        ("cluster", 0, "computing_us", 10.0), ("cluster", 1, "computing_us", 30.0),
        ("capture", 7, "wall_us_per_step", 5.0)}
    sr = slow_ranks(rows, threshold=1.2)
    assert [(r["rank"], r["ratio"], r["flagged"]) for r in sr] == [(1, 1.5, True), (0, 0.5, False)]
