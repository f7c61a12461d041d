"""Marker overhead with profiling off: `@mstx_timer_decorator` vs a plain pass-through wrapper.

Target: a decorated call with everything off <= 1.10x the same no-op behind a plain
`functools.wraps` + `def w(*a, **k): return f(*a, **k)` wrapper. Also reports, for context, the
cost when something is on (CPU, no capture: marker metrics only / tracer span only).

Method: each figure is the CPU time of this thread (time.thread_time_ns, so time spent
descheduled on a loaded machine does not count), per call, best of `--rounds` rounds of `--n`
calls; the variants take turns round by round, so a burst of load hits all of them alike.
Run: python benchmarks/bench_markers.py [--n 20000] [--rounds 200]
"""
from __future__ import annotations

import argparse
import functools
import json
import tempfile
import time
from typing import Any, Callable

from mindspeed_profiler.runtime import mstx
from mindspeed_profiler import mstx_range, mstx_timer_decorator
from mindspeed_profiler.core.state import STATE

_clock = time.thread_time_ns


def noop(x: Any = None) -> Any:
    return x


def plain_wrapper(func: Callable) -> Callable:
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        return func(*args, **kwargs)

    return wrapper


# One timing loop per call shape: the loop body is the call and nothing else.
def _no_args(f: Callable, n: int) -> float:
    t0 = _clock()
    for _ in range(n):
        f()
    return (_clock() - t0) / n


def _one_arg(f: Callable, n: int) -> float:
    t0 = _clock()
    for _ in range(n):
        f(1)
    return (_clock() - t0) / n


def _keyword(f: Callable, n: int) -> float:
    t0 = _clock()
    for _ in range(n):
        f(x=1)
    return (_clock() - t0) / n


def _range_off(f: Callable, n: int) -> float:
    t0 = _clock()
    for _ in range(n):
        with f("x"):
            pass
    return (_clock() - t0) / n


def best_ns(cases: dict[str, tuple[Callable, Callable]], n: int, rounds: int) -> dict[str, float]:
    """{label: best ns per call} for {label: (timing loop, callable)}, interleaved round by round."""
    best = {k: float("inf") for k in cases}
    for _ in range(rounds):
        for k, (loop, f) in cases.items():
            best[k] = min(best[k], loop(f, n))
    return best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=20_000, help="calls per round")
    ap.add_argument("--rounds", type=int, default=200)
    args = ap.parse_args()
    assert not STATE.mstx_enabled and STATE.tracer is None
    marked, plain = mstx_timer_decorator(noop), plain_wrapper(noop)
    res: dict[str, float] = {}
    shapes = {"": _no_args, "_1arg": _one_arg, "_kwarg": _keyword}
    for suffix, loop in shapes.items():
        got = best_ns({"bare": (loop, noop), "plain": (loop, plain), "marked": (loop, marked)}, args.n, args.rounds)
        res[f"bare{suffix}_ns"] = got["bare"]
        res[f"plain_wrapper{suffix}_ns"] = got["plain"]
        res[f"decorated_off{suffix}_ns"] = got["marked"]
        res[f"ratio_off_vs_plain{suffix}"] = got["marked"] / got["plain"]
    res["mstx_range_off_ns"] = best_ns({"r": (_range_off, mstx_range)}, args.n, args.rounds // 4)["r"]

    on_rounds = max(3, args.rounds // 10)
    mstx.enable_marker_metrics(True)
    res["decorated_metrics_on_ns"] = best_ns({"m": (_no_args, marked)}, args.n, on_rounds)["m"]
    mstx.enable_marker_metrics(False)
    from mindspeed_profiler.tracing import init_tracer, shutdown_tracer

    with tempfile.TemporaryDirectory() as d:
        init_tracer({"integrated": {"profile_save_path": d}, "tracer": {"enable": True}}, role="bench", rank=0)
        res["decorated_tracer_on_ns"] = best_ns({"t": (_no_args, marked)}, args.n, on_rounds)["t"]
        shutdown_tracer()
    print(json.dumps({k: round(v, 3 if k.startswith("ratio") else 1) for k, v in res.items()}, indent=2))
    print(f"bare call {res['bare_ns']:.0f} ns, plain pass-through wrapper {res['plain_wrapper_ns']:.0f} ns, "
          f"@mstx_timer_decorator everything off {res['decorated_off_ns']:.0f} ns")
    print(f"decorated-off / plain wrapper: {res['ratio_off_vs_plain']:.3f}x (target <= 1.10x; "
          f"f(1): {res['ratio_off_vs_plain_1arg']:.3f}x, f(x=1): {res['ratio_off_vs_plain_kwarg']:.3f}x)")


if __name__ == "__main__":
    main()
