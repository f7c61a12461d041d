"""What memory tracking costs (issue 47): the per-stage memory's cost per stage call, the memory
history's cost per iteration, an out-of-memory snapshot's dump, the host watermark's check.

    python benchmarks/bench_memory.py [--n 20000] [--rounds 7] [--write]

1. Per stage call, interleaved, best of `rounds`: iterations of 4 `with prof.stage(...)` calls and a
   `step()` (its share counted per call) of a profiler with `metrics.enable` (its tracker), with the
   memory meter as it runs, and with the meter's enter / exit replaced by no-ops (the tracker's timing
   alone); the difference is the meter's cost, its stage-call lines' writing included. Its parts are
   timed apart: the host peak's reset (a write to /proc/self/clear_refs) and read (a pread of
   /proc/self/status), and the device part through the adapter (metrics/device_memory.py) over a
   do-nothing allocator (this is our code's share; the allocator's own `reset_peak_memory_stats` and
   `memory_stats_as_nested_dict` are C++ calls that only a device measures).
2. The allocator's history per iteration (`oom_snapshot`'s ring, Python stacks): a small model's
   training iteration with the history off and on (`_record_memory_history(stacks="python",
   max_entries=100000)`) on a CUDA device. Without one (this box) it says so and measures nothing.
3. An out-of-memory snapshot's dump: `metrics/oom.dump_snapshot` of a snapshot in PyTorch's format
   holding a full 100,000-entry ring, each entry with a 20-frame Python stack (the bound of what the
   ring holds: its time and size are what an out-of-memory error costs at most with the defaults).
4. The host watermark's check, run on the background thread about every 0.5 s: one read of
   /proc/self/statm.
--write puts the tables into docs/perf_memory.md (then run benchmarks/assemble_performance_doc.py).
"""
from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

from mindspeed_profiler import IntegratedProfiler, load_config
from mindspeed_profiler.metrics import memory_tracking, oom
from mindspeed_profiler.metrics.device_memory import DeviceMemory
from mindspeed_profiler.metrics.host_watermark import HostWatermark
from mindspeed_profiler.runtime.host_memory import HostPeak

sys.path.insert(0, str(Path(__file__).resolve().parent))
from doc_section import write_region  # noqa: E402

DOC = Path(__file__).resolve().parents[1] / "docs" / "perf_memory.md"
STAGES = ("actor_generate", "actor_compute_log_prob", "reference_compute_log_prob", "actor_update")
SCRIPT = "bench_memory.py"


def per_call_ns(fn, n: int) -> float:
    t0 = time.perf_counter_ns()
    fn(n)
    return (time.perf_counter_ns() - t0) / n


def best(fn, n: int, rounds: int) -> float:
    return min(per_call_ns(fn, n) for _ in range(rounds))


class _NoAllocator:
    """The device namespace's functions doing nothing (our adapter's share of the device part)."""

    _stats = {"allocated_bytes": {"all": {"current": 0, "peak": 0}}, "reserved_bytes": {"all": {"current": 0, "peak": 0}}}

    def memory_stats_as_nested_dict(self, device=None):
        return self._stats

    def reset_peak_memory_stats(self, device=None):
        return None


def stage_call_costs(n: int, rounds: int) -> list[tuple[str, float]]:
    tmp = tempfile.mkdtemp()
    cfg = load_config({"integrated": {"profile_save_path": tmp}, "metrics": {"enable": True, "host_memory_watermark": None}})
    prof = IntegratedProfiler(cfg, role="actor", rank=0, world_size=1)
    prof.start()
    mem = prof._metrics.memory
    real_enter, real_exit = mem.enter, mem.exit
    dummy = memory_tracking.StageCall("x", 1)

    def calls(k):   # iterations of STAGES stage calls and a step() (its row and stage-call lines written)
        for _ in range(k // len(STAGES)):
            for stage in STAGES:
                with prof.stage(stage):
                    pass
            prof.step()

    def with_meter(k):
        mem.enter, mem.exit = real_enter, real_exit
        calls(k)

    def without_meter(k):
        mem.enter, mem.exit = (lambda stage, it: dummy), (lambda call, exc: None)
        calls(k)

    on = off = float("inf")
    for _ in range(rounds):   # interleaved: the box's load falls on both alike
        on = min(on, per_call_ns(with_meter, n))
        off = min(off, per_call_ns(without_meter, n))
    mem.enter, mem.exit = real_enter, real_exit
    prof.stop()
    peak = HostPeak()
    dev = DeviceMemory("cuda", _NoAllocator(), None)

    def reset(k):
        for _ in range(k):
            peak.reset()

    def read(k):
        for _ in range(k):
            peak.peak_bytes()

    def device(k):
        for _ in range(k):
            dev.reset_peaks()
            dev.peaks()
    mark = HostWatermark(0.99, lambda r: None)

    def check(k):
        for _ in range(k):
            mark.check()
    rows = [("a stage call, metrics on, memory meter off (the tracker's timing; a step() per 4 calls, its share included)", off),
            ("a stage call, metrics on, memory meter on (its stage-call line written at the step)", on),
            ("the meter's cost per stage call (the difference)", on - off),
            ("  host: the peak's reset (write /proc/self/clear_refs)", best(reset, n, rounds)),
            ("  host: the peak's read (pread /proc/self/status, VmHWM)", best(read, n, rounds)),
            ("  device: our adapter's reset + read over a do-nothing allocator", best(device, n, rounds)),
            ("the host watermark's check (read /proc/self/statm; background thread, every 0.5 s)", best(check, n, rounds))]
    peak.close()
    return rows


def synthetic_snapshot(entries: int, frames: int = 20) -> dict:
    """A snapshot in PyTorch's format holding `entries` history events with `frames`-deep Python stacks."""
    stack = [{"filename": f"/site-packages/model/layer_{i}.py", "line": 100 + i, "name": f"forward_{i}"} for i in range(frames)]
    trace, t = [], time.time_ns() // 1000
    for k in range(entries):
        trace.append({"action": "alloc" if k % 2 == 0 else "free_completed", "addr": 0x7F0000000000 + (k // 2) * 4096,
                      "size": 4096, "stream": 0, "time_us": t + k, "frames": [dict(f) for f in stack]})
    blocks = [{"address": 0x7F0000000000 + i * 4096, "size": 4096, "requested_size": 4096, "state": "active_allocated",
               "frames": [dict(f) for f in stack]} for i in range(1000)]
    return {"segments": [{"device": 0, "address": 0x7F0000000000, "total_size": 1000 * 4096, "stream": 0,
                          "segment_type": "large", "blocks": blocks}], "device_traces": [trace]}


def snapshot_dump(entries: int) -> list[tuple[str, str]]:
    data = synthetic_snapshot(entries)
    dev = type("Dev", (), {"snapshot": lambda self: data})()
    path = Path(tempfile.mkdtemp()) / "x.memory_snapshot.pickle"
    info, note = oom.dump_snapshot(dev, path)
    assert note is None, note
    return [(f"{entries:,} entries x 20 Python frames", f"{info['seconds']:.2f} s, {info['bytes'] / 2**20:.1f} MB")]


def history_cost(iterations: int) -> list[tuple[str, str]]:
    try:
        import torch
    except ImportError:
        return [("torch", "not installed")]
    if not torch.cuda.is_available():
        return [("no CUDA device here", "not measured (run this script on a GPU: the device tool)")]
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(2048, 2048) for _ in range(8)]).cuda()
    opt = torch.optim.AdamW(model.parameters())
    x = torch.randn(64, 2048, device="cuda")

    def iteration():
        loss = model(x).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    def timed(k):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(k):
            iteration()
        torch.cuda.synchronize()
        return (time.perf_counter() - t0) / k
    for _ in range(5):
        iteration()
    off = on = float("inf")
    for _ in range(5):
        torch.cuda.memory._record_memory_history(enabled=None)
        off = min(off, timed(iterations))
        torch.cuda.memory._record_memory_history(enabled="all", stacks="python", max_entries=100_000)
        on = min(on, timed(iterations))
    t0 = time.perf_counter()
    snap = torch.cuda.memory._snapshot()
    take = time.perf_counter() - t0
    torch.cuda.memory._record_memory_history(enabled=None)
    n = sum(len(t) for t in snap["device_traces"])
    return [(f"{torch.cuda.get_device_name()}: an iteration, history off", f"{off * 1e3:.2f} ms"),
            ("... history on (python stacks, 100,000-entry ring)", f"{on * 1e3:.2f} ms ({on / off:.2f}x)"),
            (f"_snapshot() of {n:,} entries", f"{take:.2f} s")]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=20_000)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--entries", type=int, default=100_000)
    ap.add_argument("--iterations", type=int, default=50)
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args()
    calls = stage_call_costs(args.n, args.rounds)
    dump = snapshot_dump(args.entries)
    history = history_cost(args.iterations)
    where = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, {time.strftime('%Y-%m-%d')}"
    lines = [f"`python benchmarks/{SCRIPT}` ({where}; best of {args.rounds} interleaved rounds of {args.n:,} calls)", "",
             "| per stage call | us |", "|---|---|"]
    lines += [f"| {name} | {ns / 1e3:.2f} |" for name, ns in calls]
    lines += ["", "| an out-of-memory snapshot's dump (metrics/oom.dump_snapshot: _snapshot's data pickled) | time, size |",
              "|---|---|"]
    lines += [f"| {a} | {b} |" for a, b in dump]
    lines += ["", "| the allocator's history per iteration (oom_snapshot) | |", "|---|---|"]
    lines += [f"| {a} | {b} |" for a, b in history]
    text = "\n".join(lines)
    print(text)
    if args.write:
        write_region(DOC, SCRIPT, text, "## This machine", "# Memory tracking: its cost (issue 47)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
