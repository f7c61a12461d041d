#!/usr/bin/env python3
"""What `integrated.auto_capture` costs a step: `with prof.stage(...)` + `prof.step()` with
`profile: false`, the key absent vs `auto_capture: false` (off: the goal is no difference) vs on and
idle (timing every iteration, never firing: factor 1e9), whole iteration and one stage timed.

Interleaved: each round measures every mode (timeit, `--number` pairs), the best round per mode is
kept; the figures are ns per pair and ratios to `absent` within this one run.

    python benchmarks/bench_auto_capture.py            # docs/perf_profiler.md has a run's figures
"""
from __future__ import annotations

import argparse
import platform
import sys
import tempfile
import timeit

from mindspeed_profiler import IntegratedProfiler, load_config

IDLE = {"factor": 1e9, "min_history": 1, "window": 100}
MODES = {
    "absent": {},
    "auto_capture: false": {"auto_capture": False},
    "dynamic: true (the listener alone)": {"dynamic": True},
    "on, whole iteration (idle)": {"auto_capture": IDLE},
    "on, stage actor_update (idle)": {"auto_capture": {**IDLE, "stage": "actor_update"}},
}


def pair_ns(integrated: dict, save: str, number: int) -> float:
    prof = IntegratedProfiler(load_config({"integrated": {"profile": False, "profile_save_path": save, **integrated}}),
                              role="bench", rank=0, world_size=1)
    prof.start()

    def body():
        with prof.stage("actor_update"):
            pass
        prof.step()

    try:
        return timeit.timeit(body, number=number) / number * 1e9
    finally:
        prof.stop()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--number", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=9)
    args = ap.parse_args(argv)
    empty = min(timeit.repeat(lambda: None, number=args.number, repeat=5)) / args.number * 1e9
    best = {m: float("inf") for m in MODES}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            names = list(MODES)[r % len(MODES):] + list(MODES)[:r % len(MODES)]   # the order rotated per round
            for name in names:
                best[name] = min(best[name], pair_ns(MODES[name], f"{tmp}/{r}", args.number) - empty)
    print(f"# {platform.machine()}, Python {platform.python_version()}; {args.rounds} rounds x {args.number:,} pairs, "
          f"best round per mode; ns per `with prof.stage(...)` + `prof.step()` (profile: false), an empty call subtracted")
    print("| mode | ns / pair | ratio to absent |\n|---|---|---|")
    for name, ns in best.items():
        print(f"| {name} | {ns:.0f} | {ns / best['absent']:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
