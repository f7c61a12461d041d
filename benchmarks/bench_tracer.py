"""Tracer span cost: on the recording thread, with the flusher running, and vs RLinf's design.

  - hot path: what the traced code pays per span, open + close (`with trace_span(...)`), in CPU
    time of the recording thread (time.thread_time_ns), best of `--rounds` rounds of `--n` spans,
    interleaved round by round with a bare call and a plain pass-through wrapper for reference;
    the buffer is flushed between rounds (outside the timed loops), so it never grows past `--n`.
    Also `@trace_func` per call. Target: <= 1 us per span.
  - throughput: `--spans` spans back to back with the flusher thread running (wall clock: the
    flusher takes the GIL and the CPU from the recording thread now and then).
  - RLinf-style (unless --no-rlinf): every span = 2 blocking `ray.get(tracer.record.remote(event))`
    round trips to a single tracer actor that appends JSONL (what RLinf's Tracer does per span).
    Target: >= 100x cheaper.
Run: python benchmarks/bench_tracer.py [--n 5000] [--rounds 200] [--spans 300000] [--rpc-spans 300] [--no-rlinf]
"""
from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from typing import Callable

from bench_markers import noop, plain_wrapper

_clock = time.thread_time_ns


def _spans_loop(n: int) -> float:
    from mindspeed_profiler.tracing import trace_span

    t0 = _clock()
    for _ in range(n):
        with trace_span("step", cat="user"):
            pass
    return (_clock() - t0) / n


def _calls_loop(f: Callable) -> Callable[[int], float]:
    def loop(n: int) -> float:
        t0 = _clock()
        for _ in range(n):
            f()
        return (_clock() - t0) / n

    return loop


def bench_hot_path(n: int, rounds: int, d: str) -> dict:
    """ns per span on the recording thread (flusher held off; flushed between rounds)."""
    from mindspeed_profiler.tracing import init_tracer, shutdown_tracer, trace_func

    held = {"flush_every_events": 10**8, "flush_interval_s": 3600.0, "buffer_max_events": 10**8}
    rec = init_tracer({"integrated": {"profile_save_path": d}, "tracer": {"enable": True, **held}}, role="hot", rank=0)
    loops = {"span": _spans_loop, "trace_func": _calls_loop(trace_func(noop)),
             "bare": _calls_loop(noop), "plain": _calls_loop(plain_wrapper(noop))}
    best = {k: float("inf") for k in loops}
    flush_ns = spans = 0
    for _ in range(rounds):
        for k, loop in loops.items():
            best[k] = min(best[k], loop(n))
        t1 = time.perf_counter_ns()
        rec.flush()
        flush_ns += time.perf_counter_ns() - t1
        spans += 2 * n
    shutdown_tracer()
    return {"span_ns": best["span"], "trace_func_call_ns": best["trace_func"], "bare_call_ns": best["bare"],
            "plain_wrapper_call_ns": best["plain"], "flush_us_per_span": flush_ns / spans / 1000, "dropped": rec.dropped}


def bench_throughput(n: int, d: str) -> dict:
    """n spans with the flusher thread running: wall-clock per span, segment size, final flush."""
    from mindspeed_profiler.tracing import init_tracer, shutdown_tracer, trace_span

    rec = init_tracer({"integrated": {"profile_save_path": d}, "tracer": {"enable": True}}, role="bench", rank=0)
    for _ in range(1000):  # warm up
        with trace_span("warm"):
            pass
    t0 = time.perf_counter()
    for _ in range(n):
        with trace_span("step", cat="user"):
            pass
    elapsed = time.perf_counter() - t0
    t1 = time.perf_counter()
    shutdown_tracer()
    flush_s = time.perf_counter() - t1
    seg_dir = os.path.join(d, "timeline")
    size = sum(os.path.getsize(os.path.join(seg_dir, f)) for f in os.listdir(seg_dir))
    return {"ours_us_per_span": elapsed / n * 1e6, "ours_spans_per_s": n / elapsed, "throughput_dropped": rec.dropped,
            "final_flush_s": flush_s, "segment_bytes_per_span": size / (n + 1000)}


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
    ap.add_argument("--n", type=int, default=5_000, help="spans per round (hot path)")
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--spans", type=int, default=300_000, help="spans with the flusher running")
    ap.add_argument("--rpc-spans", type=int, default=300)
    ap.add_argument("--no-rlinf", action="store_true", help="skip the Ray comparison")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        res = bench_hot_path(args.n, args.rounds, d)
    with tempfile.TemporaryDirectory() as d:
        res.update(bench_throughput(args.spans, d))
    if not args.no_rlinf:
        try:
            with tempfile.TemporaryDirectory() as d:
                res.update(bench_rlinf_style(args.rpc_spans, d))
            res["ratio_rlinf_over_ours"] = res["rlinf_us_per_span"] / res["ours_us_per_span"]
        except Exception as exc:  # e.g. Ray cannot start on an overloaded machine: keep the rest
            res["rlinf_error"] = repr(exc)[:200]
    print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in res.items()}, indent=2))
    print(f"span open+close on the recording thread: {res['span_ns']:.0f} ns (target <= 1000 ns); "
          f"for reference: bare call {res['bare_call_ns']:.0f} ns, plain pass-through wrapper {res['plain_wrapper_call_ns']:.0f} ns")
    if "ratio_rlinf_over_ours" in res:
        print(f"with the flusher running {res['ours_us_per_span']:.2f} us/span, RLinf-style {res['rlinf_us_per_span']:.0f} us/span: "
              f"{res['ratio_rlinf_over_ours']:.0f}x (target >= 100x)")


if __name__ == "__main__":
    main()
