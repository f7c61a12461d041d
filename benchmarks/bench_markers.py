"""Marker overhead with profiling off: `@mstx_timer_decorator` vs a plain pass-through wrapper.

Target: <= 1.5x the plain wrapper (both wrap the same no-op). Also reports the cost when markers
are on (CPU, no capture: tracer span only / metrics only) for context.
Run: python benchmarks/bench_markers.py [--n 2000000]
"""
from __future__ import annotations

import argparse
import functools
import json
import tempfile
import timeit

from mindspeed_profiler import mstx, mstx_range, mstx_timer_decorator
from mindspeed_profiler._state import STATE


def noop(x=None):
    return x


def plain_wrapper(func):
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        return func(*args, **kwargs)

    return wrapper


def per_call_ns(fn, n: int, repeat: int = 5) -> float:
    return min(timeit.repeat(fn, number=n, repeat=repeat)) / n * 1e9


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1_000_000)
    args = ap.parse_args()
    assert not STATE.mstx_enabled and STATE.tracer is None
    marked, plain = mstx_timer_decorator(noop), plain_wrapper(noop)
    res = {"bare_ns": per_call_ns(noop, args.n), "plain_wrapper_ns": per_call_ns(plain, args.n), "decorated_off_ns": per_call_ns(marked, args.n)}
    res["ratio_off_vs_plain"] = res["decorated_off_ns"] / res["plain_wrapper_ns"]
    res["mstx_range_off_ns"] = per_call_ns(lambda: mstx_range("x").__enter__(), args.n)

    mstx.enable_marker_metrics(True)
    res["decorated_metrics_on_ns"] = per_call_ns(marked, args.n // 10)
    mstx.enable_marker_metrics(False)
    from mindspeed_profiler.tracing import init_tracer, shutdown_tracer

    with tempfile.TemporaryDirectory() as d:
        init_tracer({"integrated": {"profile_save_path": d}, "tracer": {"enable": True}}, role="bench", rank=0)
        res["decorated_tracer_on_ns"] = per_call_ns(marked, args.n // 10)
        shutdown_tracer()
    print(json.dumps({k: round(v, 2) for k, v in res.items()}, indent=2))
    print(f"decorated no-op, profiling off: {res['ratio_off_vs_plain']:.2f}x a plain pass-through wrapper (target <= 1.5x)")


if __name__ == "__main__":
    main()
