"""timeline.pftrace: our protobuf encoder against Perfetto's own protos, and the protobuf timeline
against the JSON one (same workers, spans, flows; counters from the metrics tracker), on
synthetic segments and on a real traced job (a driver and a worker process)."""
from __future__ import annotations

import collections
import subprocess
import sys
import textwrap

import orjson
import pytest

from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

from mindspeed_profiler.analysis.timeline import pftrace
from mindspeed_profiler.analysis.timeline.merge import merge_timeline_dir
from mindspeed_profiler.analysis.timeline.stream import OVERLAP_TID_BASE
from pftrace_decode import decode
from test_tracing_merge import T0, _header, _write_segment


# ------------------------------------------------------------------------------ the encoder


@pytest.mark.parametrize("v", [0, 1, 127, 128, 300, 16383, 16384, 2**28 - 1, 2**28, 2**32, 2**42 - 1, 2**42,
                               2**56 - 1, 2**56, 2**63 - 1, -1, -2**63])
def test_varint_matches_protobuf(v):
    ours = pftrace.f_varint(8, v & (2**64 - 1)) if v < 0 else pftrace.f_varint(8, v)
    p = pb.TracePacket(timestamp=v & (2**64 - 1))
    assert ours == p.SerializeToString()


def test_annotations_and_descriptors_decode():
    ann = [pftrace.f_bytes(4, pftrace.f_str(10, k) + pftrace._annotation_value(v))
           for k, v in [("b", True), ("i", -5), ("f", 2.5), ("s", "stage é"), ("big", 2**70), ("n", None), ("l", [1, "x"])]]
    te = pftrace.f_varint(9, 3) + pftrace.f_str(23, "mark") + b"".join(ann)
    data = pftrace.packet(pftrace.f_varint(8, 42) + pftrace.f_bytes(11, te))
    t = pb.Trace()
    t.ParseFromString(data)
    e = t.packet[0].track_event
    assert t.packet[0].timestamp == 42 and e.type == pb.TrackEvent.TYPE_INSTANT and e.name == "mark"
    got = {a.name: getattr(a, a.WhichOneof("value")) for a in e.debug_annotations}
    assert got == {"b": True, "i": -5, "f": 2.5, "s": "stage é", "big": str(2**70), "n": "null", "l": '[1,"x"]'}


# ------------------------------------------------------------------------------ synthetic segments


def _synthetic(tmp_path):
    """A driver with rpc calls into two workers (one a clock-skewed host), nested, crossing and
    instant spans, an asyncio lane, a lane without a thread record, a truncated line."""
    d = tmp_path / "timeline"
    _write_segment(d, "driver_rank0_h1_10.seg.jsonl", _header("driver", 0, 10, T0, 0), [
        {"type": "thread", "lane": 1, "tid": 10, "name": "MainThread", "task": None},
        ["X", "iteration", "iteration", 0, 100_000, 1, {"iteration": 1}],
        ["X", "actor.update", "rpc", 10_000, 50_000, 1, {"iteration": 1}],
        ["X", "rollout.generate", "rpc", 70_000, 20_000, 1, None],
        ["i", "weights synced", "mstx", 65_000, 0, 1, None],
    ])
    skew = 3_000_000_000
    for rank, host in ((0, "h1"), (1, "h2")):
        off = skew if host == "h2" else 0
        _write_segment(d, f"actor_rank{rank}_{host}_2{rank}.seg.jsonl", _header("actor", rank, 20 + rank, T0 + off, 0, host), [
            {"type": "thread", "lane": 1, "tid": 20 + rank, "name": "MainThread", "task": None},
            {"type": "thread", "lane": 2, "tid": 20 + rank, "name": "MainThread", "task": "Task-1"},
            ["X", "update", "stage", 12_000, 40_000, 1, {"stage": "actor_update", "iteration": 1, "mb": [1, 2]}],
            ["X", "fwd", "user", 13_000, 5_000, 1, {"x": 1.5, "ok": True}],
            ["X", "begin_end_a", "user", 20_000, 10_000, 1, None],
            ["X", "begin_end_b", "user", 25_000, 10_000, 1, None],   # crosses a: the overlap lane
            ["X", "begin_end_c", "user", 28_000, 10_000, 1, None],   # crosses b on the overlap lane too
            ["X", "task", "user", 14_000, 1_000, 2, None],
            ["X", "orphan lane", "user", 15_000, 1_000, 7, None],
            ["X", "generate", "stage", 72_000, 10_000, 1, {"stage": "rollout", "iteration": 1}],
            {"type": "clock", "offset_ns": -off, "uncertainty_ns": 500, "rtt_ns": 1000, "reference": "driver"},
        ])
    with open(d / "actor_rank0_h1_20.seg.jsonl", "ab") as fh:
        fh.write(b'["X","half')
    return d


def _json_events(path):
    trace = orjson.loads(path.read_bytes())
    return trace, [e for e in trace["traceEvents"] if e["ph"] != "M"]


def _slice_key(pid, tid, name, cat, ts_ns, dur_ns, args):
    return pid, tid, name, cat, ts_ns, -1 if dur_ns is None else dur_ns, orjson.dumps(args, option=orjson.OPT_SORT_KEYS)


def _json_slices(events):
    return collections.Counter(
        _slice_key(e["pid"], e["tid"], e["name"], e["cat"], round(e["ts"] * 1000),
                   round(e["dur"] * 1000) if e["ph"] == "X" else None,
                   {k: (orjson.dumps(v).decode() if isinstance(v, (list, dict)) or v is None else v)
                    for k, v in e["args"].items() if k not in ("role", "rank")})
        for e in events)


def _decoded_slices(dec):
    return collections.Counter(
        _slice_key(*s[:6], {k: v[1] if isinstance(v, tuple) else v for k, v in s[6].items()})
        for s in dec.slices if s[0] != 0)   # pid 0: the merge's own notes


def _reference_flows(events):
    """The documented rule, brute force on the JSON: each other worker's first outermost span that
    starts inside an rpc span (the innermost rpc span holding it) ends that rpc span's flow. A span
    of an "(overlap)" lane crosses a span of its thread: never outermost."""
    spans = [e for e in events if e["ph"] == "X"]
    lanes = collections.defaultdict(list)
    for e in spans:
        if e["tid"] <= OVERLAP_TID_BASE:
            lanes[(e["pid"], e["tid"])].append(e)
    top = set()
    for lane in lanes.values():
        for e in lane:
            if not any(o is not e and o["ts"] <= e["ts"] and (o["ts"], -o["dur"]) < (e["ts"], -e["dur"])
                       and e["ts"] < o["ts"] + o["dur"] for o in lane):
                top.add(id(e))
    rpcs = [e for e in spans if e["cat"] == "rpc"]
    order = {id(e): k for k, e in enumerate(events)}
    pairs, linked = set(), set()
    for e in sorted(spans, key=lambda e: (e["ts"], -e["dur"])):
        if id(e) not in top:
            continue
        holders = [r for r in rpcs if r["pid"] != e["pid"] and r["ts"] <= e["ts"] <= r["ts"] + r["dur"]
                   and (r["ts"], -r["dur"]) < (e["ts"], -e["dur"])]
        if holders:
            r = max(holders, key=lambda r: order[id(r)])   # the latest begun (in timeline order)
            if (id(r), e["pid"]) not in linked:
                linked.add((id(r), e["pid"]))
                pairs.add((r["name"], r["pid"], round(r["ts"] * 1000), e["name"], e["pid"], round(e["ts"] * 1000)))
    return pairs


def _decoded_flows(dec):
    out = set()
    for a, b in dec.flows:
        sa, sb = dec.slices[a], dec.slices[b]
        out.add((sa[2], sa[0], sa[4], sb[2], sb[0], sb[4]))
    return out


def _assert_same_timeline(d):
    """The .pftrace beside timeline.json says the same workers, threads, spans and flows."""
    trace, events = _json_events(d / "timeline.json")
    dec = decode(d / "timeline.pftrace")
    procs = {e["pid"]: e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "process_name"}
    assert {p: n for p, n in dec.processes.items() if p != 0} == procs
    json_threads = {(e["pid"], e["tid"]) for e in events}
    assert {(pid, tid) for pid, tid, _ in dec.threads.values() if pid != 0} == json_threads
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "thread_name"}
    assert all(names.get((pid, tid), f"thread {tid}") == n for pid, tid, n in dec.threads.values() if pid != 0)
    assert _decoded_slices(dec) == _json_slices(events)
    assert _decoded_flows(dec) == _reference_flows(events)
    return trace, events, dec


def test_pftrace_says_what_the_json_says(tmp_path):
    d = _synthetic(tmp_path)
    res = merge_timeline_dir(str(d))
    assert res.pftrace == d / "timeline.pftrace"
    trace, events, dec = _assert_same_timeline(d)
    flows = _decoded_flows(dec)
    assert ("actor.update", 1, 10_000, "update", 2, 12_000) in flows   # driver -> actor:0
    assert any(f[0] == "actor.update" and f[4] == 3 for f in flows)      # driver -> actor:1, across hosts
    # the crossing spans of the JSON's overlap lane nest on extra tracks: nothing dropped
    assert sum(1 for s in dec.slices if s[2].startswith("begin_end")) == 6   # 3 per worker
    # interning: each name once in the whole file
    raw = (d / "timeline.pftrace").read_bytes()
    assert raw.count(b"begin_end_a") == 1 and raw.count(b"actor_update") == 1


def test_counters_from_the_metrics_tracker(tmp_path):
    d = _synthetic(tmp_path)
    (tmp_path / "metrics").mkdir()
    (tmp_path / "metrics" / "driver_rank0.jsonl").write_text(
        json_line({"iteration": 1, "perf/throughput": 1234.5, "perf/max_memory_allocated_gb": 7.25}))
    merge_timeline_dir(str(d))
    dec = decode(d / "timeline.pftrace")
    assert sorted(dec.counter_values) == [(1, "max memory allocated", 0, 7.25), (1, "tokens/s", 0, 1234.5)]


def json_line(row: dict) -> str:
    return orjson.dumps(row).decode() + "\n"


_WORKER = textwrap.dedent("""
    import sys, time
    from mindspeed_profiler.tracing import init_tracer, shutdown_tracer, trace_span
    init_tracer({"integrated": {"profile_save_path": sys.argv[1]}, "tracer": {"enable": True}}, role="ActorGroup", rank=0)
    with trace_span("work", cat="worker", args={"n": 3}):
        for i in range(3):
            with trace_span("step", args={"i": i}):
                time.sleep(0.002)
    shutdown_tracer()
""")


def test_a_real_traced_job(tmp_path):
    """A driver process whose rpc span waits for a worker process: both traced for real."""
    from mindspeed_profiler.tracing import init_tracer, shutdown_tracer, trace_span

    init_tracer({"integrated": {"profile_save_path": str(tmp_path)}, "tracer": {"enable": True}}, role="driver", rank=0)
    try:
        with trace_span("iteration", cat="iteration", args={"iteration": 1}):
            with trace_span("actor.work", cat="rpc"):
                subprocess.run([sys.executable, "-c", _WORKER, str(tmp_path)], check=True, timeout=120)
    finally:
        shutdown_tracer()
    merge_timeline_dir(str(tmp_path))
    trace, events, dec = _assert_same_timeline(tmp_path / "timeline")
    assert sorted(dec.processes.values()) == ["ActorGroup:0", "driver"]
    assert {(f[0], f[3]) for f in _decoded_flows(dec)} == {("actor.work", "work")}


# ------------------------------------------------------------------------------ the merge's fast path


@pytest.mark.parametrize("hold_limit", [pftrace.HOLD_LIMIT_BYTES, 300])
def test_slices_writes_what_slice_writes(monkeypatch, hold_limit):
    """The merge's batch path (`slices`: records' tags and args text, everything inlined) and the
    general one (`slice`) write the same bytes: rpc begins held (and, with a small hold limit,
    given up early), crossing slices, instants, flows, names and args interned once."""
    import io
    import random

    from mindspeed_profiler.analysis.timeline.spill import RecordMaker

    monkeypatch.setattr(pftrace, "HOLD_LIMIT_BYTES", hold_limit)
    rnd = random.Random(5)
    makers = {pid: RecordMaker({"role": "driver" if pid == 1 else "actor", "rank": pid}) for pid in (1, 2, 3)}
    events, t = [], 0
    for i in range(3000):
        t += rnd.choice([0, 0, 1, 7, 1000, 20000])
        pid = rnd.choice([1, 2, 3])
        tid = rnd.choice([pid * 10, pid * 10 + 1])
        dur = None if rnd.random() < 0.1 else rnd.choice([0, 5, 3000, 50000])
        cat = "rpc" if pid == 1 and rnd.random() < 0.5 else rnd.choice(["user", "stage", "iteration"])
        name = rnd.choice(["fwd", "bwd", "é\u2028", "actor.update"])
        args = rnd.choice([None, {}, {"iteration": i % 7, "stage": "s"}, {"x": 1.5, "ok": True, "n": None},
                           {"l": [1, "x"], "big": 2**62}, {"role": "other", "k": "v"}, {"rank": 9}])
        events.append((pid, tid, t, dur, name, cat, args, rnd.random() < 0.5))

    def general():
        fh = io.BytesIO()
        w = pftrace.PftraceWriter(fh)
        for pid, tid, ts, dur, name, cat, args, top in events:
            full = {**makers[pid].base, **(args or {})}
            w.slice(pid, tid, ts, dur, name, cat, full, top)
        w.finish()
        return fh.getvalue(), w.flows.n_flows

    def fast():
        fh = io.BytesIO()
        w = pftrace.PftraceWriter(fh)
        items = []
        for pid, tid, ts, dur, name, cat, args, top in events:
            m = makers[pid]
            items.append(((pid, tid), pid, ts, dur, m.tag("X" if dur is not None else "i", name, cat), m.args(args), top))
        for k in range(0, len(items), 700):
            w.slices(items[k:k + 700])
        w.finish()
        return fh.getvalue(), w.flows.n_flows

    (a, fa), (b, fb) = general(), fast()
    assert fa > 10 and (fa, len(a)) == (fb, len(b)) and a == b
    trace = pb.Trace()
    trace.ParseFromString(b)
    assert sum(p.track_event.type == pb.TrackEvent.TYPE_SLICE_BEGIN for p in trace.packet) == \
        sum(e[3] is not None for e in events)
