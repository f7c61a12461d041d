#!/usr/bin/env python3
"""What `export_after_run` with memory or stack recording costs the training thread after the window
(issue 45, item 1): the iterations after the last window against the same iterations without a
profiler, and what the run's end pays.

torch's collection toggle (`toggle_collection_dynamic`) turns off ops and device activity only: a
torch.profiler session kept open with `profile_memory` or `with_stack` goes on recording every
allocation and every Python call until it is stopped. The two ways out the issue named, measured
here in one run:

- `kept open`: the session is held to the run's end (what export_after_run did before issue 45):
  nothing in the window's last step, but every later iteration records, the process grows with the
  run's length, and the run's end stops a session that grew;
- `written at the window's end` (what export_after_run does now with memory or stack, and what the
  default export does): torch's stop and raw write in the window's last step, nothing after it.

Modes, each in its own process (a clean resident size), interleaved over --rounds rounds; each
mode's iterations after the window against `off`'s in the same round, the median round kept: `off` (no profiler), `kept open` (a held session driven directly, as
backends/held_session.py held it), `written at the window's end` (IntegratedProfiler,
`export_after_run: true` + `profile_with_memory` + `profile_with_stack`, as a user sets them). The
workload: a small MLP's forward, backward and SGD step (op-bound, many allocations), the window its
iteration --warm + 1.

    python benchmarks/bench_held_session.py             # print the table
    python benchmarks/bench_held_session.py --write     # also write it into docs/reliability.md
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
MODES = ("off", "kept open", "written at the window's end")


def make_model(width: int, layers: int):
    import torch

    torch.manual_seed(0)
    body = [m for _ in range(layers) for m in (torch.nn.Linear(width, width), torch.nn.GELU())]
    model = torch.nn.Sequential(*body, torch.nn.Linear(width, 1))
    return model, torch.optim.SGD(model.parameters(), lr=1e-3)


def iteration(model, opt, x) -> None:
    loss = model(x).square().mean()
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()


def rss_mb() -> float:
    from mindspeed_profiler.runtime.host_memory import rss_bytes

    return (rss_bytes() or 0) / 2**20


def child(mode: str, args) -> dict:
    """One mode in this process: the window's last iteration, the iterations after it, the growth
    over them, and stop()."""
    import torch

    torch.set_num_threads(1)
    model, opt = make_model(args.width, args.layers)
    x = torch.randn(args.batch, args.width)
    first = args.warm + 1
    prof = session = None
    if mode == "written at the window's end":
        from mindspeed_profiler import IntegratedProfiler, load_config

        cfg = load_config({"integrated": {"profile": True, "profile_level": "level1", "profile_with_memory": True,
                                          "profile_with_stack": True, "export_after_run": True,
                                          "profile_save_path": tempfile.mkdtemp(prefix="bench_held_"),
                                          "profile_step_start": first, "profile_step_end": first + 1}})
        prof = IntegratedProfiler(cfg, role="bench", rank=0, world_size=1)
        prof.start()
    elif mode == "kept open":
        from torch.profiler import ProfilerActivity, profile

        from mindspeed_profiler.backends import held_session

        acts = [ProfilerActivity.CPU]
        session = held_session.HeldSession(("bench",), profile(activities=acts, record_shapes=True, profile_memory=True,
                                                               with_stack=True, with_flops=True), acts)
        session.prof.prepare_trace()
    times: list[float] = []
    for i in range(1, args.warm + 2 + args.after):
        t0 = time.thread_time()
        if session is not None and i == first:
            session.open_window("w")
        iteration(model, opt, x)
        if session is not None and i == first:
            session.close_window()
        if prof is not None:
            prof.step()   # the window closes in the step that ends it: its stop and write are here
        times.append(time.thread_time() - t0)
        if i == first + 1:
            rss0 = rss_mb()
    grown = rss_mb() - rss0
    t0 = time.perf_counter()
    if prof is not None:
        prof.stop()
    elif session is not None:
        session.flush(lambda name, run: (run(), None))   # its stop and write, and the cut (no window held)
    end_s = time.perf_counter() - t0
    return {"before": times[:args.warm], "window_end": times[first - 1], "after": times[first + 1:],
            "grown_mb": grown, "end_s": end_s}


def run_mode(mode: str, args) -> dict:
    cmd = [sys.executable, __file__, "--child", mode, "--warm", str(args.warm), "--after", str(args.after),
           "--width", str(args.width), "--layers", str(args.layers), "--batch", str(args.batch)]
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=1800,
                         env={**os.environ, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"})
    if out.returncode != 0:
        raise RuntimeError(f"{mode}: {out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def table(results: dict[str, list[dict]], args) -> str:
    """Per mode, the median over the rounds of its iterations after the window against `off`'s in
    the same round (medians), and that median round's other figures."""
    offs = [statistics.median(r["after"]) for r in results["off"]]
    rows = ["| mode | an iteration after the window / off's (same round) | the window's last iteration (ms) | "
            f"growth over the {args.after} iterations after it (MB) | stop() at the run's end (s) |",
            "|---|---|---|---|---|"]
    for mode in MODES:
        ratios = [statistics.median(r["after"]) / off for r, off in zip(results[mode], offs)]
        k = sorted(range(len(ratios)), key=ratios.__getitem__)[len(ratios) // 2]
        r = results[mode][k]
        rows.append(f"| {mode} | {ratios[k]:.2f}x ({min(ratios):.2f}-{max(ratios):.2f}) | {r['window_end'] * 1e3:.1f} | "
                    f"{r['grown_mb']:.1f} | {r['end_s']:.2f} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--warm", type=int, default=50, help="uncaptured iterations before the window")
    ap.add_argument("--after", type=int, default=300, help="iterations after the window")
    ap.add_argument("--width", type=int, default=128)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--write", action="store_true", help="write the table into docs/reliability.md")
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args)))
        return 0
    results: dict[str, list[dict]] = {m: [] for m in MODES}
    for r in range(args.rounds):
        for mode in MODES:
            results[mode].append(run_mode(mode, args))
        print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)
    off = statistics.median(statistics.median(r["after"]) for r in results["off"])
    text = (f"{args.rounds} rounds on {platform.machine()} ({os.cpu_count()} cores), "
            f"{time.strftime('%Y-%m-%d %H:%M')}; the training thread's CPU time (time.thread_time: less of the "
            f"load of other processes on the box), one uncaptured iteration {off * 1e3:.2f} ms (an MLP of "
            f"{args.layers} x {args.width}, batch {args.batch}, one thread), {args.warm} before the window; "
            "level1 + memory + stack:\n\n"
            + table(results, args))
    print(text)
    if args.write:
        from doc_section import write_region   # benchmarks/, this script's directory

        write_region(REPO / "docs" / "reliability.md", Path(__file__).name, text,
                     "### Measured: a held session after its window (benchmarks/bench_held_session.py)",
                     "# Reliability")
    return 0


if __name__ == "__main__":
    sys.exit(main())
