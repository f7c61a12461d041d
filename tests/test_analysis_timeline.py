"""RL timeline analysis on a hand-built Chrome trace in the docs/formats.md convention, with every
expected figure worked out by hand in the comments."""
from __future__ import annotations

import gzip
import json
import sys
import types

import pytest

from mindspeed_profiler.analysis.driver import analyse_directory
from mindspeed_profiler.analysis.timeline import analyse_timeline, critical_path

WORKERS = {1: ("driver", None, None), 2: ("ActorGroup:0", "actor", 0), 3: ("ActorGroup:1", "actor", 1),
           4: ("RefGroup:0", "reference", 0)}
# (pid, stage, iteration, ts, dur) in microseconds
STAGES = [
    (2, "actor_generate", 1, 0, 400), (3, "actor_generate", 1, 0, 500),
    (2, "actor_compute_log_prob", 1, 450, 200), (4, "reference_compute_log_prob", 1, 500, 200),
    (2, "actor_update", 1, 700, 250), (3, "actor_update", 1, 720, 260),
    (2, "actor_generate", 2, 1000, 300), (3, "actor_update", 2, 1350, 400),
]
ITERS = [(1, 0, 1000), (2, 1000, 800)]


def trace(with_iterations: bool = True) -> dict:
    ev = []
    for pid, (pname, _, _) in WORKERS.items():
        ev.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": pname}})
    for pid, stage, it, ts, dur in STAGES:
        _, role, rank = WORKERS[pid]
        ev.append({"ph": "X", "cat": "stage", "name": stage, "pid": pid, "tid": 1, "ts": ts, "dur": dur,
                   "args": {"role": role, "rank": rank, "stage": stage, "iteration": it}})
        # noise the analysis must ignore: user spans inside stages
        ev.append({"ph": "X", "cat": "user", "name": "forward", "pid": pid, "tid": 1, "ts": ts + 1, "dur": 5, "args": {}})
    if with_iterations:
        for it, ts, dur in ITERS:
            ev.append({"ph": "X", "cat": "iteration", "name": f"iteration {it}", "pid": 1, "tid": 1, "ts": ts,
                       "dur": dur, "args": {"iteration": it}})
    return {"traceEvents": ev, "displayTimeUnit": "ms", "otherData": {}}


def test_per_iteration_breakdown():
    tl = analyse_timeline(trace())
    it1, it2 = tl["iterations"]
    assert (it1["iteration"], it1["dur_us"], it2["dur_us"]) == (1, 1000, 800)
    st = {k: (v["total_us"], v["wall_us"], v["count"]) for k, v in it1["stages"].items()}
    assert st == {"actor_generate": (900, 500, 2),            # 400 + 500; union [0, 500]
                  "actor_compute_log_prob": (200, 200, 1),
                  "reference_compute_log_prob": (200, 200, 1),
                  "actor_update": (510, 280, 2)}              # 250 + 260; union [700, 980]
    assert it1["stage_covered_us"] == 980                    # [0, 980] without a gap
    assert it1["overlap_us"] == 200                          # [450, 500] gen/logp + [500, 650] logp/ref
    assert it1["no_stage_us"] == 20
    assert it1["idle_per_worker_us"] == {"actor:0": 150,     # 1000 - (400 + 200 + 250)
                                         "actor:1": 240,     # 1000 - (500 + 260)
                                         "reference:0": 800}
    # walking back from 1000: update@actor:1 ends 980; before 720 the reference pass ends 700;
    # before 500 generation on actor:1 ends at 500 and starts at 0
    assert [(p["stage"], p["worker"], p["wait_before_end_us"]) for p in it1["critical_path"]] == [
        ("actor_generate", "actor:1", 0), ("reference_compute_log_prob", "reference:0", 20),
        ("actor_update", "actor:1", 20)]
    assert it2["overlap_us"] == 0 and it2["no_stage_us"] == 100
    assert [(p["stage"], p["worker"]) for p in it2["critical_path"]] == [("actor_generate", "actor:0"),
                                                                       ("actor_update", "actor:1")]
    table = {(r["stage"], r["worker"]): (r["count"], r["total_us"], r["mean_us"]) for r in tl["stage_worker"]}
    assert table[("actor_generate", "actor:0")] == (2, 700, 350)
    assert table[("actor_update", "actor:1")] == (2, 660, 330)
    assert len(tl["gantt"]) == len(STAGES)


def test_slow_ranks_use_the_median_span():
    """A worker whose one call was slow (warm-up) is not flagged; one slow on most calls is."""
    from mindspeed_profiler.analysis.crossrank import stage_rank_rows

    spans = []
    for it in range(1, 6):
        for w, dur in (("actor:0", 5000 if it == 1 else 100), ("actor:1", 100), ("actor:2", 300)):
            spans.append({"ph": "X", "cat": "stage", "name": "actor_update", "pid": int(w[-1]), "tid": 0,
                          "ts": it * 10_000, "dur": dur, "args": {"role": "actor", "rank": int(w[-1]), "iteration": it}})
    tl = analyse_timeline({"traceEvents": spans})
    med = {r["worker"]: r["median_us"] for r in tl["stage_worker"]}
    assert med == {"actor:0": 100, "actor:1": 100, "actor:2": 300}
    rows = stage_rank_rows([{"kind": "timeline", "status": "ok", "path": "t", "timeline": tl}])
    assert {r["rank"]: r["value_us"] for r in rows if r["metric"] == "median_span_us"} == med


def test_iterations_derived_from_stage_args():
    tl = analyse_timeline(trace(with_iterations=False))
    assert [(i["iteration"], i["start_us"], i["dur_us"]) for i in tl["iterations"]] == [(1, 0, 980), (2, 1000, 750)]


def test_critical_path_with_gap_and_nothing():
    spans = [{"stage": "a", "worker": "w", "ts": 10, "dur": 10}, {"stage": "b", "worker": "v", "ts": 40, "dur": 20}]
    cp = critical_path(spans, 0, 100)
    assert [(p["stage"], p["wait_before_end_us"]) for p in cp] == [("a", 20), ("b", 40)]
    assert critical_path([], 0, 10) == []


def test_timeline_in_a_profile_dir(tmp_path):
    d = tmp_path / "timeline"
    d.mkdir()
    (d / "timeline.json.gz").write_bytes(gzip.compress(json.dumps(trace()).encode()))
    (d / "driver_0.seg.jsonl").write_text("")   # segments beside the merged file: the merged file wins
    summary, code = analyse_directory(tmp_path, jobs=1, progress=False)
    assert code == 0
    (cap,) = summary["captures"]
    assert cap["kind"] == "timeline" and summary["timeline"]["n_iterations"] == 2
    rows = {(r["stage"], r["rank"]): r["value_us"] for r in summary["stage_rank"] if r["source"] == "timeline"}
    assert rows[("actor_update", "actor:1")] == 330
    html = (tmp_path / "analysis" / "report.html").read_text()
    assert html.count('class="span"') == len(STAGES)


def test_segments_only_use_build_timeline(tmp_path, monkeypatch):
    d = tmp_path / "timeline"
    d.mkdir()
    (d / "actor_0.seg.jsonl").write_text("{}\n")
    calls = []
    fake = types.ModuleType("mindspeed_profiler.tracing.merge")

    def build_timeline(timeline_dir: str) -> dict:   # the contract's signature
        calls.append(timeline_dir)
        return trace()
    fake.build_timeline = build_timeline
    monkeypatch.setitem(sys.modules, "mindspeed_profiler.tracing.merge", fake)
    summary, code = analyse_directory(tmp_path, jobs=1, progress=False)
    assert code == 0 and calls == [str(d)]
    assert summary["timeline"]["iterations"][0]["overlap_us"] == 200


def test_segments_without_tracing_package(tmp_path, monkeypatch):
    d = tmp_path / "timeline"
    d.mkdir()
    (d / "actor_0.seg.jsonl").write_text("{}\n")
    monkeypatch.setitem(sys.modules, "mindspeed_profiler.tracing.merge", None)   # import -> ImportError
    summary, code = analyse_directory(tmp_path, jobs=1, progress=False)
    (cap,) = summary["captures"]
    assert code == 1 and cap["status"] == "failed"
    assert "seg.jsonl" in cap["error"] and "mindspeed-profiler merge" in cap["error"]


def test_no_stage_spans_is_reported_not_failed():
    tl = analyse_timeline({"traceEvents": [{"ph": "X", "cat": "user", "name": "x", "ts": 0, "dur": 1}]})
    assert tl["iterations"] == [] and "no 'stage' or 'iteration' spans" in tl["warning"]
    with pytest.raises(ValueError, match="no traceEvents"):
        analyse_timeline({"foo": 1})
