"""End to end on a real local Ray cluster: driver + two actors calling each other, clock alignment,
the collector sink and a collector that dies mid-run. Slow (a Ray start): `pytest -m slow`."""
from __future__ import annotations

import json
import time

import pytest

ray = pytest.importorskip("ray")

from mindspeed_profiler.tracing import init_tracer, shutdown_tracer, trace_span  # noqa: E402
from mindspeed_profiler.tracing.clock import SKEW_ENV  # noqa: E402
from mindspeed_profiler.analysis.timeline.merge import write_timeline  # noqa: E402
from mindspeed_profiler.tracing.ray_support import shutdown_actor_tracers, sync_actor_clocks  # noqa: E402
from conftest import tracer_cfg

pytestmark = pytest.mark.slow
TIMEOUT = 60


@ray.remote(num_cpus=0.1)
class Worker:
    def __init__(self, cfg, role, rank):
        self.peer = None
        init_tracer(cfg, role=role, rank=rank)

    def set_peer(self, peer):
        self.peer = peer

    def compute(self, x):
        with trace_span("compute", cat="worker", args={"x": x}):
            time.sleep(0.01)
            return x * 2

    def work(self, x):
        with trace_span("work", cat="worker"):
            with trace_span("call_peer", cat="rpc"):
                y = ray.get(self.peer.compute.remote(x), timeout=TIMEOUT)
            time.sleep(0.005)
            return y + 1


def _nesting_violations(events):
    """Spans on one (pid, tid) that cross instead of nesting (Perfetto would drop them)."""
    bad = []
    lanes = {}
    for e in events:
        if e["ph"] == "X":
            lanes.setdefault((e["pid"], e["tid"]), []).append(e)
    for lane in lanes.values():
        lane.sort(key=lambda e: (e["ts"], -e["dur"]))
        stack = []
        for e in lane:
            end = e["ts"] + e["dur"]
            while stack and stack[-1][0] <= e["ts"]:
                stack.pop()
            if stack and end > stack[-1][0] + 1e-3:
                bad.append((stack[-1][1], e["name"]))
            stack.append((end, e["name"]))
    return bad


def test_driver_and_two_actors_merge_aligned(ray_cluster, clean_state, tmp_path):
    cfg = tracer_cfg(tmp_path, flush_interval_s=0.5)
    init_tracer(cfg, role="driver", rank=0)
    skews = {"ActorGroup": 2_500_000_000, "RolloutGroup": -1_700_000_000}  # pretend other hosts' clocks are off
    actors = {
        role: Worker.options(runtime_env={"env_vars": {SKEW_ENV: str(skew)}}).remote(cfg, role, 0)
        for role, skew in skews.items()
    }
    a, b = actors["ActorGroup"], actors["RolloutGroup"]
    ray.get(a.set_peer.remote(b), timeout=TIMEOUT)
    syncs = sync_actor_clocks([a, b], rounds=8)
    for s, skew in zip(syncs, skews.values()):
        assert s.estimate is not None, s.error
        assert abs(s.estimate.offset_ns + skew) <= s.estimate.uncertainty_ns + 100_000
    for it in range(1, 4):
        with trace_span(f"iteration {it}", cat="iteration", args={"iteration": it}):
            with trace_span("actor.work", cat="rpc"):
                assert ray.get(a.work.remote(it), timeout=TIMEOUT) == 2 * it + 1
    assert shutdown_actor_tracers([a, b]) == 2
    shutdown_tracer()

    path = write_timeline(str(tmp_path))
    trace = json.loads(path.read_text())  # plain JSON, no jq
    events = trace["traceEvents"]
    procs = {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    assert sorted(procs.values()) == ["ActorGroup:0", "RolloutGroup:0", "driver"]
    assert procs[1] == "driver"  # sorted first
    assert _nesting_violations(events) == []
    info = {p["name"]: p for p in trace["otherData"]["processes"]}
    assert all(info[n]["synced"] and info[n]["closed"] for n in ("ActorGroup:0", "RolloutGroup:0"))
    unc_us = {n: info[n]["uncertainty_ns"] / 1000 for n in ("ActorGroup:0", "RolloutGroup:0")}

    def spans(name, proc):
        pid = next(p for p, n in procs.items() if n == proc)
        return sorted((e for e in events if e["ph"] == "X" and e["name"] == name and e["pid"] == pid), key=lambda e: e["ts"])

    calls, works = spans("actor.work", "driver"), spans("work", "ActorGroup:0")
    peer_calls, computes = spans("call_peer", "ActorGroup:0"), spans("compute", "RolloutGroup:0")
    assert len(calls) == len(works) == len(peer_calls) == len(computes) == 3
    tol_a = unc_us["ActorGroup:0"] + 50  # the estimate's bound (half the best RTT) + anchor reads
    tol_ab = tol_a + unc_us["RolloutGroup:0"]
    for call, work, pc, comp in zip(calls, works, peer_calls, computes):
        # the remote span starts after the caller's began and ends before the caller's returned
        assert call["ts"] - tol_a <= work["ts"] and work["ts"] + work["dur"] <= call["ts"] + call["dur"] + tol_a
        assert pc["ts"] - tol_ab <= comp["ts"] and comp["ts"] + comp["dur"] <= pc["ts"] + pc["dur"] + tol_ab
    its = [e for e in events if e["ph"] == "X" and e["cat"] == "iteration"]
    assert [e["args"]["iteration"] for e in its] == [1, 2, 3]
    # report the measured figures (pytest -s)
    slack = min(min(w["ts"] - c["ts"], c["ts"] + c["dur"] - w["ts"] - w["dur"]) for c, w in zip(calls, works))
    print(f"\nuncertainty us: {unc_us}; min containment margin driver->ActorGroup: {slack:.1f} us")


def test_collector_sink_and_dead_collector(ray_cluster, clean_state, tmp_path):
    from mindspeed_profiler.tracing.collector import COLLECTOR_NAME

    cfg = tracer_cfg(tmp_path, sink="collector", flush_interval_s=0.2)
    init_tracer(cfg, role="driver", rank=0)  # starts the collector on this node
    collector = ray.get_actor(COLLECTOR_NAME)
    w = Worker.remote(cfg, "ActorGroup", 1)

    def sink_info(worker):
        def probe(_self):
            from mindspeed_profiler.core.state import STATE
            from mindspeed_profiler.core import warn as _warn
            from mindspeed_profiler.tracing import flush_tracer

            from mindspeed_profiler.tracing import trace_span

            for _ in range(2):  # two batches: the second write waits for the first one's ack
                with trace_span("probe"):
                    pass
                flush_tracer()
            rec = STATE.tracer
            return type(rec.sink).__name__, rec.failed_writes, sorted(k for k in _warn._seen if isinstance(k, str) and k.startswith("tracer-sink"))

        return ray.get(worker.__ray_call__.remote(probe), timeout=TIMEOUT)

    w.set_peer.remote(w)
    ray.get(w.compute.remote(1), timeout=TIMEOUT)
    assert sink_info(w) == ("CollectorSink", 0, [])
    assert ray.get(collector.__ray_call__.remote(lambda c: c.batches), timeout=TIMEOUT) >= 2
    ray.kill(collector)
    deadline = time.time() + TIMEOUT
    while time.time() < deadline:  # ray.kill is asynchronous: wait until the collector is gone
        try:
            ray.get(collector.directory.remote(), timeout=5)
            time.sleep(0.1)
        except Exception:
            break
    # training goes on: calls succeed, the worker switches to a local file after one warning
    for i in range(3):
        assert ray.get(w.compute.remote(i), timeout=TIMEOUT) == 2 * i
    kind, failed, warned = sink_info(w)
    assert kind == "FileSink" and failed >= 1 and len(warned) == 1
    ray.get(w.compute.remote(9), timeout=TIMEOUT)
    assert shutdown_actor_tracers([w]) == 1
    shutdown_tracer()  # the driver's collector is dead too: one warning, no exception
    trace = json.loads(write_timeline(str(tmp_path)).read_text())
    names = {e["args"]["name"] for e in trace["traceEvents"] if e["ph"] == "M" and e["name"] == "process_name"}
    assert "ActorGroup:1" in names
    xs = [e["args"]["x"] for e in trace["traceEvents"] if e["ph"] == "X" and e["name"] == "compute"]
    assert 1 in xs and 9 in xs  # before the collector died, and after the fallback
