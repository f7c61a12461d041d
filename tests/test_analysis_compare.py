"""Comparing two runs' summaries (analysis.analyzers.compare) on hand-built summaries."""
from __future__ import annotations

from mindspeed_profiler.analysis.analyzers.compare import compare


def test_compare_op_below_top_n_is_unknown_not_zero():
    def s(ops):
        return {"root": "x", "options": {"top": 2}, "stage_rank": [], "timeline": None,
                "captures": [{"status": "ok", "steps": [], "top_kernels": [],
                              "top_ops": [{"name": n, "self_us": v} for n, v in ops]}]}
    # y fell below B's top-2 cut (B lists x and z): its B value is unknown, not 0
    res = compare(s([("x", 100.0), ("y", 50.0)]), s([("x", 110.0), ("z", 60.0)]))
    rows = {r["key"]: r for r in res["ops"]}
    assert rows["y"]["delta_us"] is None and rows["z"]["delta_us"] is None
    assert rows["x"]["delta_us"] == 10.0
    assert res["ops"][0]["key"] == "x"        # known deltas first, by |delta|
