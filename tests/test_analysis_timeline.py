"""RL timeline analysis on a hand-built Chrome trace in the docs/formats.md convention, with every
expected figure worked out by hand in the comments."""
from __future__ import annotations

import gzip
import json

import pytest

from analysis_testutil import stage_timeline
from mindspeed_profiler.analysis.pipeline.batch import analyse_directory
from mindspeed_profiler.analysis.analyzers.critical_path import critical_path
from mindspeed_profiler.analysis.analyzers.stages import analyse_timeline

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
    from mindspeed_profiler.analysis.analyzers.crossrank import stage_rank_rows

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


def test_segments_only_are_merged_in_memory_like_the_merged_file(tmp_path):
    """A timeline directory with only segments (no merge ran) gives the same analysis as its
    merged timeline.json; the segments are real ones, written by the tracer's recorder."""
    from mindspeed_profiler.analysis.timeline.merge import write_timeline
    from mindspeed_profiler.tracing.recorder import Recorder
    from mindspeed_profiler.tracing.sinks import FileSink

    d = tmp_path / "run" / "timeline"
    for rank in (0, 1):
        rec = Recorder("actor", rank, FileSink(str(d), f"actor_rank{rank}_h_{100 + rank}.seg.jsonl"), start_thread=False)
        rec.pid = rec.header["pid"] = 100 + rank   # two processes of one machine
        base = rec.anchor.mono_ns
        for it in (1, 2):
            t = base + it * 10_000_000
            rec.add(("X", "iteration", "iteration", t, t + 9_000_000, 1, 0, {"iteration": it}, None, None))
            rec.add(("X", "actor_update", "stage", t + 1_000_000, t + (4 + rank) * 1_000_000, 1, 0,
                     {"iteration": it, "stage": "actor_update", "role": "actor", "rank": rank}, None, None))
        rec.close()
    from_segments, code = analyse_directory(tmp_path / "run", jobs=1, progress=False, write=False)
    assert code == 0 and from_segments["timeline"]["n_iterations"] == 2
    write_timeline(str(d))
    from_merged, code = analyse_directory(tmp_path / "run", jobs=1, progress=False, write=False)
    assert code == 0
    assert from_segments["timeline"] == from_merged["timeline"]
    rows = {r["rank"]: r["median_us"] for r in from_merged["timeline"]["stage_worker"]}
    assert rows == {0: 3000.0, 1: 4000.0}


def test_no_stage_spans_is_reported_not_failed():
    tl = analyse_timeline({"traceEvents": [{"ph": "X", "cat": "user", "name": "x", "ts": 0, "dur": 1}]})
    assert tl["iterations"] == [] and "no 'stage' or 'iteration' spans" in tl["warning"]
    with pytest.raises(ValueError, match="no traceEvents"):
        analyse_timeline({"foo": 1})


def test_overlap_is_time_with_two_or_more_stages():
    # three stages all running over [0, 100]: 100 us with >= 2 stages (sum of walls - union = 200)
    # plus stage d alone over [200, 300]; a and d touch nothing
    t = analyse_timeline(stage_timeline([("w1", "a", 1, 0, 100), ("w2", "b", 1, 0, 100), ("w3", "c", 1, 0, 100),
                                         ("w1", "d", 1, 200, 100)], [(1, 0, 400)]))
    it = t["iterations"][0]
    assert it["overlap_us"] == 100.0 and it["stage_covered_us"] == 200.0


def test_idle_lists_a_worker_without_spans_in_the_iteration():
    # w2 works only in iteration 1, so in iteration 2 (100 us) it is idle all the time
    t = analyse_timeline(stage_timeline([("w1", "a", 1, 0, 50), ("w2", "b", 1, 0, 80), ("w1", "a", 2, 100, 30)],
                                        [(1, 0, 100), (2, 100, 100)]))
    assert t["iterations"][1]["idle_per_worker_us"] == {"w1:0": 70.0, "w2:0": 100.0}


def test_timeline_index_keeps_spans_without_iteration_number():
    # spans are found per iteration through an index (a scan per iteration was quadratic in long
    # runs); a span without args.iteration that starts long before a window still counts in it:
    # "sync" runs [50, 350] and covers iteration 2 = [100, 200] and 3 = [200, 300] (clipped: 100 each)
    spans = [("w1", "a", 1, 0, 80), ("w1", "a", 2, 100, 30), ("w1", "a", 3, 200, 30)]
    tr = stage_timeline(spans, [(1, 0, 100), (2, 100, 100), (3, 200, 100)])
    tr["traceEvents"].append({"ph": "X", "cat": "stage", "name": "sync", "pid": 1, "tid": 1, "ts": 50, "dur": 300,
                              "args": {"role": "w2", "rank": 0, "stage": "sync"}})
    its = analyse_timeline(tr)["iterations"]
    assert [it["stages"]["sync"]["total_us"] for it in its] == [50.0, 100.0, 100.0]
    assert [it["stages"]["a"]["total_us"] for it in its] == [80.0, 30.0, 30.0]
    assert [it["overlap_us"] for it in its] == [30.0, 30.0, 30.0]   # a and sync together
