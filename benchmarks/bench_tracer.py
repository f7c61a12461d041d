"""Tracer span cost vs RLinf's design (one blocking Ray actor call per event), side by side.

  - ours: `with trace_span(...)`: in-memory append, flushed by a background thread
  - RLinf-style: every span = 2 blocking `ray.get(tracer.record.remote(event))` round trips
    to a single tracer actor that appends JSONL (what RLinf's Tracer does per span)
Targets: ours <= 2 us per span; >= 100x cheaper than the per-event actor call.
Run: python benchmarks/bench_tracer.py [--spans 200000] [--rpc-spans 300]
"""
from __future__ import annotations

import argparse
import json
import os
import tempfile
import time


def _time_spans(n: int) -> float:
    """Seconds for n empty spans on the hot path (the tracer must already be initialised)."""
    from mindspeed_profiler.tracing import trace_span

    t0 = time.perf_counter()
    for _ in range(n):
        with trace_span("step", cat="user"):
            pass
    return time.perf_counter() - t0


def bench_ours(n: int, d: str) -> dict:
    from mindspeed_profiler.tracing import init_tracer, shutdown_tracer, trace_span

    rec = init_tracer({"integrated": {"profile_save_path": d}, "tracer": {"enable": True}}, role="bench", rank=0)
    for _ in range(1000):  # warm up
        with trace_span("warm"):
            pass
    elapsed = _time_spans(n)
    t1 = time.perf_counter()
    shutdown_tracer()
    flush_s = time.perf_counter() - t1
    seg_dir = os.path.join(d, "timeline")
    size = sum(os.path.getsize(os.path.join(seg_dir, f)) for f in os.listdir(seg_dir))
    return {"ours_us_per_span": elapsed / n * 1e6, "ours_spans_per_s": n / elapsed, "dropped": rec.dropped, "final_flush_s": flush_s, "segment_bytes_per_span": size / (n + 1000)}


def bench_split(n: int, d: str) -> dict:
    """The same spans with the flusher held off, then one flush: hot path vs encode+write cost."""
    from mindspeed_profiler.tracing import init_tracer, shutdown_tracer

    big = {"flush_every_events": 10**8, "flush_interval_s": 3600.0, "buffer_max_events": 10**8}
    rec = init_tracer({"integrated": {"profile_save_path": d}, "tracer": {"enable": True, **big}}, role="split", rank=0)
    hot = _time_spans(n)
    t1 = time.perf_counter()
    rec.flush()
    flush = time.perf_counter() - t1
    shutdown_tracer()
    return {"hot_path_us_per_span": hot / n * 1e6, "flush_us_per_span": flush / n * 1e6}


def bench_rlinf_style(n: int, d: str) -> dict:
    import ray

    @ray.remote(num_cpus=0)
    class Tracer:  # RLinf's shape: a single actor appending JSONL, one call per event
        def __init__(self, path):
            self.fh = open(path, "a")

        def record(self, event):
            self.fh.write(json.dumps(event) + "\n")
            self.fh.flush()

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        tracer = Tracer.remote(os.path.join(d, "trace_events.jsonl"))
        ray.get(tracer.record.remote({"warm": 1}))
        t0 = time.perf_counter()
        for i in range(n):
            ray.get(tracer.record.remote({"name": "step", "ph": "B", "ts": time.time_ns() // 1000, "pid": "driver", "tid": "main"}))
            ray.get(tracer.record.remote({"name": "step", "ph": "E", "ts": time.time_ns() // 1000, "pid": "driver", "tid": "main"}))
        elapsed = time.perf_counter() - t0
    finally:
        ray.shutdown()
    return {"rlinf_us_per_span": elapsed / n * 1e6}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--spans", type=int, default=200_000)
    ap.add_argument("--rpc-spans", type=int, default=300)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        res = bench_ours(args.spans, d)
    with tempfile.TemporaryDirectory() as d:
        res.update(bench_split(args.spans, d))
    with tempfile.TemporaryDirectory() as d:
        res.update(bench_rlinf_style(args.rpc_spans, d))
    res["ratio_rlinf_over_ours"] = res["rlinf_us_per_span"] / res["ours_us_per_span"]
    print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in res.items()}, indent=2))
    print(f"ours {res['ours_us_per_span']:.2f} us/span (target <= 2), RLinf-style {res['rlinf_us_per_span']:.0f} us/span: {res['ratio_rlinf_over_ours']:.0f}x (target >= 100x)")


if __name__ == "__main__":
    main()
