"""Comparing two runs' summaries (analysis.analyzers.compare) on hand-built summaries."""
from __future__ import annotations

from mindspeed_profiler.analysis.analyzers.compare import compare


def test_compare_op_below_top_n_is_unknown_not_zero():
    def s(ops):
        return {"root": "x", "options": {"top": 2}, "stage_rank": [], "timeline": None,
                "captures": [{"status": "ok", "kind": "kineto", "steps": [], "top_kernels": [],
                              "top_ops": [{"name": n, "self_us": v} for n, v in ops]}]}
    # y fell below B's top-2 cut (B lists x and z): its B value is unknown, not 0
    res = compare(s([("x", 100.0), ("y", 50.0)]), s([("x", 110.0), ("z", 60.0)]))
    rows = {r["name"]: r for r in res["ops"]}
    assert rows["y"]["delta_us"] is None and rows["z"]["delta_us"] is None
    assert rows["x"]["delta_us"] == 10.0
    assert res["ops"][0]["name"] == "x"       # known deltas first, by |delta|
    assert rows["y"]["status"] == rows["z"]["status"] == "unknown"


def test_complete_totals_find_the_biggest_change_below_the_top_n_cut(tmp_path, repo_root):
    """HTA's real trace-diff pair (tests/data/hta/trace_diff): analysed with --top 5, the largest
    per-step change and the new kernels still come first. Every figure is recomputed here from the
    raw events, independently of the analysis."""
    import gzip
    import json
    import shutil

    from mindspeed_profiler.analysis.pipeline.batch import analyse_directory

    sides = {}
    for side in ("control", "test"):
        src = repo_root / "tests" / "data" / "hta" / "trace_diff" / side / f"{side}.json.gz"
        d = tmp_path / side
        d.mkdir()
        shutil.copy(src, d)
        sides[side], code = analyse_directory(d, jobs=1, progress=False, write=False, top_n=5)
        assert code == 0
        # independent: device time per kernel name, per ProfilerStep, from the raw events
        ev = json.load(gzip.open(src))["traceEvents"]
        n_steps = len({e["name"] for e in ev if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")})
        per = {}
        for e in ev:
            if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"):
                per[e["name"]] = per.get(e["name"], 0.0) + e["dur"] / n_steps
        sides[side + "_raw"] = per
    res = compare(sides["control"], sides["test"])
    assert res["how"]["level"] == "all"
    a_raw, b_raw = sides["control_raw"], sides["test_raw"]
    truth = sorted(((b_raw.get(k, 0) - a_raw.get(k, 0), k) for k in set(a_raw) | set(b_raw)), key=lambda x: -abs(x[0]))
    top = res["kernels"][0]
    assert top["name"] == truth[0][1] and abs(top["delta_us"] - truth[0][0]) < 1e-3
    # it was below the top-5 cut of the control side, and is still first
    assert top["name"] not in {k["name"] for c in sides["control"]["captures"] for k in c["top_kernels"]}
    new = [k for k in b_raw if k not in a_raw]
    assert new and {r["name"] for r in res["kernels"] if r["status"] == "new"} == set(new)
    for r in res["kernels"][:20]:
        assert abs(r["delta_us"] - (b_raw.get(r["name"], 0) - a_raw.get(r["name"], 0))) < 1e-3


def _cap(stage, rank, steps, ops):
    return {"status": "ok", "kind": "torch", "stage": stage, "role": "actor", "rank": rank, "steps": [{}] * steps,
            "op_totals": [[n, 1, v, v, 0.0] for n, v in ops.items()], "kernel_totals": []}


def test_like_with_like_per_step():
    a = {"captures": [_cap("gen", 0, 2, {"mm": 200.0}), _cap("gen", 1, 2, {"mm": 220.0}),
                      _cap("upd", 0, 1, {"mm": 50.0})], "stage_rank": []}
    b = {"captures": [_cap("gen", 0, 2, {"mm": 200.0}), _cap("gen", 1, 2, {"mm": 420.0, "new_op": 10.0}),
                      _cap("upd", 0, 1, {"mm": 50.0})], "stage_rank": []}
    res = compare(a, b)
    assert res["how"]["level"] == "rank"   # the same (stage, worker) captures on both sides
    rows = {(r["stage"], r["worker"], r["name"]): r for r in res["ops"]}
    assert rows[("gen", "actor:1", "mm")]["delta_us"] == 100.0     # (420 - 220) / 2 steps
    assert rows[("gen", "actor:1", "new_op")]["status"] == "new" and rows[("gen", "actor:1", "new_op")]["a_us"] is None
    assert rows[("gen", "actor:0", "mm")]["status"] == "same"
    b["captures"].append(_cap("gen", 2, 2, {"mm": 0.0}))           # B has a third generate rank: stage by stage
    res = compare(a, b)
    assert res["how"]["level"] == "stage"
    rows = {(r["stage"], r["name"]): r for r in res["ops"]}
    assert rows[("gen", "mm")]["a_us"] == (100 + 110) / 2 and rows[("gen", "mm")]["b_us"] == (100 + 210 + 0) / 3
    b["captures"] = [_cap("other", 0, 1, {"mm": 1.0})]             # nothing in common: pooled, said so
    assert compare(a, b)["how"]["level"] == "all" and "pooled" in compare(a, b)["how"]["values"]
