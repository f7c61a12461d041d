"""Samples on the RL timeline (analysis/timeline/sample_tracks.py, docs/rollout.md "On the
timeline"): a real tracer's segments plus a samples file in the documented format, merged: one slice
per sample on the worker's own process, lanes that never overlap, times equal to the records plus
the worker's clock offset, phases nested, the "samples running" counter, the bounds (65,536
samples), a corrupt line, a worker without spans, and the same slices and counters in the
.pftrace (decoded with Perfetto's own protos)."""
from __future__ import annotations

import collections
import random
import time

import orjson
import pytest

from mindspeed_profiler import IntegratedProfiler, load_config, tracing
from mindspeed_profiler.analysis.parsing.samples import Sample
from mindspeed_profiler.analysis.timeline import sample_tracks as st
from mindspeed_profiler.analysis.timeline.merge import merge_timeline_dir
from mindspeed_profiler.core import formats
from pftrace_decode import decode
from test_tracing_merge import T0, _header, _write_segment

MS = 1_000_000


# ------------------------------------------------------------------------------ helpers


def write_samples(save, role, rank, batches, extra_lines=()):
    """A samples file as record_samples writes it (docs/rollout.md): per batch (iteration, stage,
    [sample dicts]) a batch line then its sample lines; `extra_lines` (raw bytes) appended."""
    d = save / formats.SAMPLES_DIR
    d.mkdir(parents=True, exist_ok=True)
    with open(d / formats.samples_file_name(role, rank), "wb") as fh:
        for it, stage, samples in batches:
            fh.write(orjson.dumps({"type": "batch", "v": 1, "role": role, "rank": rank, "iteration": it, "stage": stage,
                                   "samples": len(samples), "dropped": 0, "recorded_ns": T0, "source": "dict",
                                   "clock": "wall", "problems": []}) + b"\n")
            for s in samples:
                fh.write(orjson.dumps({"type": "sample", "iteration": it, "stage": stage, **s}) + b"\n")
        for raw in extra_lines:
            fh.write(raw + b"\n")


def sample(i, start, end, **kw):
    return {"id": str(i), "prompt_tokens": 10, "response_tokens": 5 + i, "start_ns": start, "end_ns": end,
            "finish_reason": "stop", "truncated": False, "policy_version": 1, "problem": None, **kw}


def merged(d):
    res = merge_timeline_dir(str(d))
    trace = orjson.loads(res.path.read_bytes())
    return trace, decode(res.pftrace)


def sample_slices(trace):
    return [e for e in trace["traceEvents"] if e.get("cat") == st.CAT_SAMPLE]


def ns(us):
    return round(us * 1000)


def assert_lanes_do_not_overlap(trace):
    by_tid = collections.defaultdict(list)
    for e in sample_slices(trace):
        by_tid[(e["pid"], e["tid"])].append((ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])))
    for spans in by_tid.values():
        spans.sort()
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))
    return by_tid


def json_samples_key(trace):
    """(pid, tid, name, ts ns, dur ns or -1, args) of every sample and phase event, as the decoder says them."""
    return collections.Counter(
        (e["pid"], e["tid"], e["name"], ns(e["ts"]), ns(e["dur"]) if e["ph"] == "X" else -1,
         orjson.dumps(e["args"], option=orjson.OPT_SORT_KEYS))
        for e in trace["traceEvents"] if e.get("cat") in (st.CAT_SAMPLE, st.CAT_PHASE))


def pftrace_samples_key(dec):
    return collections.Counter(
        (s[0], s[1], s[2], s[4], -1 if s[5] is None else s[5], orjson.dumps(s[6], option=orjson.OPT_SORT_KEYS))
        for s in dec.slices if s[3] in (st.CAT_SAMPLE, st.CAT_PHASE))


def json_counters(trace):
    return sorted((e["pid"], f"{e['name']} {k}", ns(e["ts"]), float(v))
                  for e in trace["traceEvents"] if e["ph"] == "C" for k, v in e["args"].items())


def brute_running(spans, t):
    return sum(1 for a, b in spans if a <= t < b)


# ------------------------------------------------------------------------------ a real tracer


@pytest.fixture
def traced(tmp_path, clean_state):
    """A real profiler + tracer (actor rank 0, two iterations of actor_generate): the save path and
    the wall-clock ns (start, end) of each actor_generate stage measured around it."""
    cfg = load_config({"integrated": {"profile": False, "profile_save_path": str(tmp_path)},
                       "tracer": {"enable": True, "output_dir": str(tmp_path / "timeline")}})
    tracing.init_tracer(cfg, role="actor", rank=0)
    stages = []
    try:
        prof = IntegratedProfiler(cfg, role="actor", rank=0, world_size=1)
        prof.start()
        for _ in range(2):
            with prof.stage("actor_generate"):
                a = time.time_ns()
                time.sleep(0.03)
                stages.append((a, time.time_ns()))
            with prof.stage("actor_update"):
                time.sleep(0.005)
            prof.step()
        prof.stop()
    finally:
        tracing.shutdown_tracer()
    return tmp_path, stages


def test_samples_of_a_traced_worker_sit_under_its_stage_span(traced):
    save, stages = traced
    rnd = random.Random(1)
    batches, records = [], {}
    for it, (a, b) in enumerate(stages, 1):
        group = []
        for i in range(12):   # overlapping samples inside the stage's wall time
            s0 = a + rnd.randrange(0, 10 * MS)
            s1 = min(b - MS, s0 + rnd.randrange(MS, 19 * MS))
            rec = sample(100 * it + i, s0, s1, first_token_ns=s0 + (s1 - s0) // 4, queue_s=0.0005, prefill_s=0.001,
                         decode_s=(s1 - s0) / 1e9 * 0.7)
            group.append(rec)
            records[rec["id"]] = rec
        batches.append((it, "actor_generate", group))
    write_samples(save, "actor", 0, batches)
    trace, dec = merged(save / "timeline")

    procs = trace["otherData"]["processes"]
    (actor,) = [p for p in procs if p["role"] == "actor" and p["rank"] == 0]
    origin = trace["otherData"]["time_origin_unix_ns"]
    slices = sample_slices(trace)
    assert len(slices) == 24 and {e["pid"] for e in slices} == {actor["pid"]}
    for e in slices:   # times: the record's wall ns + the worker's offset, since the origin
        rec = records[e["args"]["id"]]
        assert ns(e["ts"]) + origin == rec["start_ns"] + actor["offset_ns"]
        assert ns(e["ts"]) + ns(e["dur"]) + origin == rec["end_ns"] + actor["offset_ns"]
        assert e["name"] == f"sample {rec['id']}" and e["args"]["tokens"] == rec["response_tokens"]
        assert e["args"]["finish_reason"] == "stop" and e["args"]["policy_version"] == 1
    # under the stage span of its iteration, on the same process
    spans = {e["args"]["iteration"]: e for e in trace["traceEvents"]
             if e.get("cat") == formats.CAT_STAGE and e["name"] == "actor_generate"}
    for e in slices:
        stage = spans[e["args"]["iteration"]]
        assert stage["pid"] == e["pid"] and stage["ts"] <= e["ts"] and e["ts"] + e["dur"] <= stage["ts"] + stage["dur"]
    lanes = assert_lanes_do_not_overlap(trace)
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "thread_name"}
    assert names[(actor["pid"], st.SAMPLES_TID_BASE)] == "samples (actor_generate)"
    assert all(names[k].startswith("samples (actor_generate)") for k in lanes)
    # the counter: the samples running at every point equals a brute-force count
    truth = [(r["start_ns"] + actor["offset_ns"] - origin, r["end_ns"] + actor["offset_ns"] - origin)
             for r in records.values()]
    counter = [(ns(e["ts"]), e["args"]) for e in trace["traceEvents"] if e["ph"] == "C"]
    assert counter and counter[-1][1] == {"running": 0}
    for t, args in counter:
        assert args["running"] == brute_running(truth, t)
    # the .pftrace says the same: slices (phases and first tokens included) and counters
    assert pftrace_samples_key(dec) == json_samples_key(trace)
    assert sorted((p, n, t, v) for p, n, t, v in dec.counter_values if n.startswith("samples")) == json_counters(trace)
    info = trace["otherData"]["sample_tracks"]
    assert info == [{"worker": "actor:0", "pid": actor["pid"], "stage": "actor_generate", "samples": 24, "drawn": 24,
                     "lanes": len(lanes), "over_cap": 0, "over_lanes": 0, "clock_offset_ns": actor["offset_ns"],
                     "on_worker_process": True, "untimed": 0}]


# ------------------------------------------------------------------------------ synthetic segments


def _worker_segment(d, role, rank, pid, offset_ns, spans, run_id="run-1"):
    header = {**_header(role, rank, pid, T0, 0), "run_id": run_id}
    lines = [{"type": "thread", "lane": 1, "tid": pid, "name": "MainThread", "task": None}] + spans
    lines.append({"type": "clock", "offset_ns": offset_ns, "uncertainty_ns": 100, "rtt_ns": 200, "reference": "driver"})
    _write_segment(d, f"{role}_rank{rank}_h1_{pid}.seg.jsonl", header, lines)


def _stage(start, dur, it=1, name="actor_generate"):
    return ["X", name, formats.CAT_STAGE, start, dur, 1, {"stage": name, "iteration": it}]


def test_the_offset_of_the_worker_s_spans_and_the_phases(tmp_path):
    d = tmp_path / "timeline"
    _worker_segment(d, "driver", 0, 10, 0, [["X", "iteration", formats.CAT_ITERATION, 0, 200 * MS, 1, {"iteration": 1}]])
    _worker_segment(d, "rollout", 1, 20, -5_000 * MS, [_stage(5_000 * MS, 100 * MS)])   # its clock 5 s ahead
    s = sample(7, T0 + 5_010 * MS, T0 + 5_090 * MS, first_token_ns=T0 + 5_030 * MS,
               queue_s=0.005, prefill_s=0.015, decode_s=0.06)
    write_samples(tmp_path, "rollout", 1, [(1, "actor_generate", [s])])
    trace, dec = merged(d)
    (w,) = [p for p in trace["otherData"]["processes"] if p["role"] == "rollout"]
    assert w["offset_ns"] == -5_000 * MS
    evs = {e["name"]: e for e in trace["traceEvents"] if e.get("cat") in (st.CAT_SAMPLE, st.CAT_PHASE)}
    origin = trace["otherData"]["time_origin_unix_ns"]

    def at(e):   # back on the worker's own wall clock
        return ns(e["ts"]) + origin + 5_000 * MS
    assert at(evs["sample 7"]) == T0 + 5_010 * MS and ns(evs["sample 7"]["dur"]) == 80 * MS
    assert (at(evs["queue"]), ns(evs["queue"]["dur"])) == (T0 + 5_010 * MS, 5 * MS)
    assert (at(evs["prefill"]), ns(evs["prefill"]["dur"])) == (T0 + 5_015 * MS, 15 * MS)
    assert (at(evs["decode"]), ns(evs["decode"]["dur"])) == (T0 + 5_030 * MS, 60 * MS)
    assert at(evs["first token"]) == T0 + 5_030 * MS and evs["first token"]["ph"] == "i"
    stage = next(e for e in trace["traceEvents"] if e.get("cat") == formats.CAT_STAGE)
    assert stage["pid"] == evs["sample 7"]["pid"] and stage["ts"] <= evs["sample 7"]["ts"]
    assert len({e["tid"] for e in evs.values()}) == 1
    assert pftrace_samples_key(dec) == json_samples_key(trace)
    assert b"(crossing" not in (d / "timeline.pftrace").read_bytes()   # nested: no extra track needed


def test_a_worker_without_spans_a_corrupt_line_and_another_run(tmp_path):
    d = tmp_path / "timeline"
    _worker_segment(d, "actor", 0, 20, 0, [_stage(0, 100 * MS)])
    good = [sample(i, T0 + i * MS, T0 + (i + 3) * MS) for i in range(5)]
    write_samples(tmp_path, "actor", 0, [(1, "actor_generate", good[:3])],
                  extra_lines=[b'{"type": "sample", "iteration": 1, "sta', *(orjson.dumps(
                      {"type": "sample", "iteration": 1, "stage": "actor_generate", **s}) for s in good[3:])])
    write_samples(tmp_path, "rollout", 2, [(1, "actor_generate", [sample(9, T0, T0 + 2 * MS),
                                                                  sample(10, None, T0 + 2 * MS)])])
    trace, dec = merged(d)
    warnings = trace["otherData"]["warnings"]
    slices = sample_slices(trace)
    assert sorted(e["args"]["id"] for e in slices) == ["0", "1", "2", "3", "4", "9"]   # the corrupt line's neighbours kept
    assert any("actor_rank0.jsonl: line 5" in w and "not valid JSON" in w for w in warnings)
    # rollout:2 has no spans: a process of its own, no offset, said
    pid = next(e["pid"] for e in slices if e["args"]["id"] == "9")
    procs = {e["pid"]: e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "process_name"}
    assert procs[pid] == "rollout:2 (samples)" and dec.processes[pid] == "rollout:2 (samples)"
    assert any("rollout:2 has no spans" in w and "no clock offset" in w for w in warnings)
    assert any("1 sample(s) without usable start / end" in w for w in warnings)
    info = {i["worker"]: i for i in trace["otherData"]["sample_tracks"]}
    assert info["rollout:2 (samples)"]["on_worker_process"] is False and info["rollout:2 (samples)"]["untimed"] == 1
    assert info["rollout:2 (samples)"]["clock_offset_ns"] is None
    assert pftrace_samples_key(dec) == json_samples_key(trace)


def test_samples_of_another_run_are_left_out(tmp_path):
    d = tmp_path / "timeline"
    _worker_segment(d, "actor", 0, 20, 0, [_stage(0, 100 * MS)], run_id="run-2")
    write_samples(tmp_path, "actor", 0, [(1, "actor_generate", [sample(1, T0, T0 + MS)])])
    path = tmp_path / "samples" / "actor_rank0.jsonl"
    other = orjson.dumps({"type": "batch", "v": 1, "role": "actor", "rank": 0, "iteration": 1, "stage": "actor_generate",
                          "samples": 1, "dropped": 0, "run_id": "run-1"})
    mine = other.replace(b'"run-1"', b'"run-2"')
    line = [orjson.dumps({"type": "sample", "iteration": 1, "stage": "actor_generate", **sample(i, T0, T0 + MS)})
            for i in (5, 6)]
    path.write_bytes(b"\n".join([other, line[0], mine, line[1]]) + b"\n")
    trace, _ = merged(d)
    assert [e["args"]["id"] for e in sample_slices(trace)] == ["6"]
    assert any("1 sample(s) of another run left out" in w for w in trace["otherData"]["warnings"])


# ------------------------------------------------------------------------------ the bounds


def test_more_samples_at_once_than_lanes(tmp_path):
    d = tmp_path / "timeline"
    _worker_segment(d, "actor", 0, 20, 0, [_stage(0, 100 * MS)])
    write_samples(tmp_path, "actor", 0, [(1, "actor_generate", [sample(i, T0 + i, T0 + 50 * MS + i) for i in range(100)])])
    trace, dec = merged(d)
    lanes = assert_lanes_do_not_overlap(trace)
    assert len(lanes) == st.MAX_LANES and len(sample_slices(trace)) == st.MAX_LANES
    counter = [e["args"] for e in trace["traceEvents"] if e["ph"] == "C"]
    assert max(a["running"] for a in counter) == 100 and max(a["not drawn"] for a in counter) == 100 - st.MAX_LANES
    assert counter[-1] == {"running": 0, "not drawn": 0}
    assert any(f"36 sample(s) of actor_generate ran while {st.MAX_LANES} others did" in w
               for w in trace["otherData"]["warnings"])
    assert sorted((p, n, t, v) for p, n, t, v in dec.counter_values if n.startswith("samples")) == json_counters(trace)
    assert {n for _p, n, _t, _v in dec.counter_values} == {"samples (actor_generate) running",
                                                            "samples (actor_generate) not drawn"}


def test_a_65536_sample_file_stays_bounded(tmp_path):
    """The writer's per-iteration bound in one file: at most MAX_SLICES_PER_WORKER slices drawn,
    the counter thinned to MAX_COUNTER_POINTS, the rest said."""
    d = tmp_path / "timeline"
    n = formats.MAX_SAMPLES_PER_ITERATION
    _worker_segment(d, "actor", 0, 20, 0, [_stage(0, n * MS // 8)])
    write_samples(tmp_path, "actor", 0, [(1, "actor_generate", [
        {"id": str(i), "start_ns": T0 + i * MS // 8, "end_ns": T0 + i * MS // 8 + 2 * MS, "response_tokens": i}
        for i in range(n)])])
    t0 = time.perf_counter()
    trace, dec = merged(d)
    took = time.perf_counter() - t0
    slices = sample_slices(trace)
    assert len(slices) == st.MAX_SLICES_PER_WORKER
    assert max(int(e["args"]["id"]) for e in slices) == st.MAX_SLICES_PER_WORKER - 1   # the first by start
    counters = [e for e in trace["traceEvents"] if e["ph"] == "C"]
    assert len(counters) <= st.MAX_COUNTER_POINTS and max(c["args"]["running"] for c in counters) == 16
    assert max(c["args"]["not drawn"] for c in counters) == 16 and counters[-1]["args"]["running"] == 0
    (info,) = trace["otherData"]["sample_tracks"]
    assert info["over_cap"] == n - st.MAX_SLICES_PER_WORKER and info["drawn"] == st.MAX_SLICES_PER_WORKER
    assert any(f"only the first {st.MAX_SLICES_PER_WORKER} by start drawn" in w for w in trace["otherData"]["warnings"])
    assert sum(1 for s in dec.slices if s[3] == st.CAT_SAMPLE) == st.MAX_SLICES_PER_WORKER
    assert took < 20, took


# ------------------------------------------------------------------------------ the pure pieces


def test_first_fit_lanes_never_overlap_and_take_the_lowest_free_lane():
    rnd = random.Random(5)
    spans = [(a, a + rnd.randrange(0, 50)) for a in (rnd.randrange(0, 500) for _ in range(400))]
    lanes = st.first_fit_lanes(spans, 8)
    ends: dict = {}
    for i in sorted(range(len(spans)), key=lambda i: (spans[i][0], -spans[i][1], i)):
        a, b = spans[i]
        free = [k for k in range(8) if ends.get(k, -1) <= a]
        assert lanes[i] == (free[0] if free else None)
        if lanes[i] is not None:
            ends[lanes[i]] = b
    assert None in lanes   # 8 lanes were too few: the test saw the bound


def test_running_counts_and_thinning_keep_the_peak():
    spans = [(0, 10), (10, 20), (5, 15), (30, 30)]
    assert st.running_counts(spans, [False, True, False, False]) == [
        (0, 1, 0), (5, 2, 0), (10, 2, 1), (15, 1, 1), (20, 0, 0), (30, 0, 0)]
    points = [(t, 1 + (t == 500), 0) for t in range(1000)] + [(1000, 0, 0)]
    thinned = st.thin(points, 10)
    assert len(thinned) <= 10 and max(p[1] for p in thinned) == 2 and thinned[-1] == (1000, 0, 0)


def test_phases_are_clipped_to_the_sample():
    s = Sample(role="a", rank=0, iteration=1, stage="g", id="1", start_ns=0, end_ns=100,
               queue_s=30e-9, prefill_s=200e-9, decode_s=50e-9)
    assert st.phases(s) == [("queue", 0, 30), ("prefill", 30, 100)]   # prefill cut at the end, no room for decode
    s = Sample(role="a", rank=0, iteration=1, stage="g", id="1", start_ns=0, end_ns=100, queue_s=10e-9, decode_s=95e-9)
    assert st.phases(s) == [("queue", 0, 10), ("decode", 10, 100)]


def test_merge_window_keeps_the_samples_it_overlaps(tmp_path):
    from mindspeed_profiler.analysis.timeline.stream import Cut
    d = tmp_path / "timeline"
    _worker_segment(d, "actor", 0, 20, 0, [_stage(0, 1000 * MS)])
    write_samples(tmp_path, "actor", 0, [(1, "actor_generate", [sample(i, T0 + i * 100 * MS, T0 + i * 100 * MS + 50 * MS)
                                                                for i in range(10)])])
    res = merge_timeline_dir(str(d), cut=Cut(start_s=0.32, end_s=0.6))   # the origin is T0: the stage's start
    trace = orjson.loads(res.path.read_bytes())
    # 3 (0.30-0.35 s) overlaps the window's start; 6 starts at its end (exclusive)
    assert [e["args"]["id"] for e in sample_slices(trace)] == ["3", "4", "5"]


def test_the_profiler_s_own_records_on_its_timeline(tmp_path, clean_state):
    """End to end: record_samples (plain dicts, time.time() seconds) in a traced run, the tracer's
    segments and the written samples file merged: one slice per record, at the record's times."""
    cfg = load_config({"integrated": {"profile": False, "profile_save_path": str(tmp_path)},
                       "tracer": {"enable": True, "output_dir": str(tmp_path / "timeline")}})
    tracing.init_tracer(cfg, role="actor", rank=0)
    try:
        prof = IntegratedProfiler(cfg, role="actor", rank=0, world_size=1)
        prof.start()
        for it in range(2):
            with prof.stage("actor_generate"):
                items = []
                for i in range(4):
                    t0 = time.time()
                    time.sleep(0.002)
                    items.append({"id": f"{it}-{i}", "prompt_tokens": 3, "response_tokens": 7, "start": t0,
                                  "first_token": t0 + 0.0005, "end": time.time(), "finish_reason": "length"})
                prof.record_samples(items, stage="actor_generate")
            prof.step()
        prof.stop()
    finally:
        tracing.shutdown_tracer()
    records = {r["id"]: r for r in map(orjson.loads, (tmp_path / "samples" / "actor_rank0.jsonl").read_bytes().splitlines())
               if r["type"] == "sample"}
    trace, dec = merged(tmp_path / "timeline")
    (actor,) = trace["otherData"]["processes"]
    origin = trace["otherData"]["time_origin_unix_ns"]
    slices = sample_slices(trace)
    assert sorted(e["args"]["id"] for e in slices) == sorted(records) and len(records) == 8
    for e in slices:
        r = records[e["args"]["id"]]
        assert e["pid"] == actor["pid"] and e["args"]["truncated"] is True and e["args"]["tokens"] == 7
        assert (ns(e["ts"]) + origin, ns(e["ts"]) + ns(e["dur"]) + origin) == (r["start_ns"] + actor["offset_ns"],
                                                                              r["end_ns"] + actor["offset_ns"])
    assert sum(1 for e in trace["traceEvents"] if e.get("name") == "first token") == 8
    assert pftrace_samples_key(dec) == json_samples_key(trace)


def test_many_workers_share_the_total_bound(tmp_path, monkeypatch):
    monkeypatch.setattr(st, "MAX_SLICES_TOTAL", 10)
    d = tmp_path / "timeline"
    for rank in range(3):
        _worker_segment(d, "actor", rank, 20 + rank, 0, [_stage(0, 100 * MS)])
        write_samples(tmp_path, "actor", rank, [(1, "actor_generate", [sample(i, T0 + i * MS, T0 + (i + 1) * MS)
                                                                        for i in range(5)])])
    trace, _ = merged(d)
    drawn = collections.Counter(e["pid"] for e in sample_slices(trace))
    assert sorted(drawn.values()) == [3, 3, 3]   # 10 // 3 each
    assert [i["over_cap"] for i in trace["otherData"]["sample_tracks"]] == [2, 2, 2]
    assert sum("only the first 3 by start drawn" in w for w in trace["otherData"]["warnings"]) == 3
