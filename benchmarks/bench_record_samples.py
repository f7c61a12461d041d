#!/usr/bin/env python3
"""record_samples' cost: the training-thread part for 1,024 samples (plain dicts, vLLM-shaped
RequestOutputs, SGLang result dicts) and the deferred write at the next step(), inline and on a
background thread (what that thread takes from a training thread running Python at the same time).

The budget (issue 33): at most 1 ms on the training thread for 1,024 samples per iteration. Each
figure is the best of `--repeat` timings (timeit's rule: the minimum is the cost, the rest is
noise from the other processes of the machine). The vLLM objects are the test fakes built from
vLLM 0.33's recorded fields (tests/rollout_record_fakes.py), with `metrics` set.

    python benchmarks/bench_record_samples.py              # print the table
    python benchmarks/bench_record_samples.py --repeat 50
"""
from __future__ import annotations

import argparse
import platform
import shutil
import queue
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))   # the snapshot-built fakes

from rollout_record_fakes import RequestStateStats, completion, request_output, sglang_result  # noqa: E402

from mindspeed_profiler import IntegratedProfiler, load_config  # noqa: E402
from mindspeed_profiler.rollout.recorder import recorder_of  # noqa: E402

N = 1024


def plain_dicts(now: float) -> list[dict]:
    return [{"id": i, "prompt_tokens": 128, "response_tokens": 200 + i, "start": now - 5, "first_token": now - 4.9,
             "end": now - 1 + i * 1e-4, "finish_reason": "stop", "policy_version": 3} for i in range(N)]


def vllm_outputs(now: float) -> list:
    mono = time.monotonic()
    return [request_output(f"req-{i}", n_prompt=128, outputs=[completion(0, 200 + i % 50, "stop")],
                           metrics=RequestStateStats(arrival_time=now - 5, queued_ts=mono - 4.99, scheduled_ts=mono - 4.98,
                                                     first_token_ts=mono - 4.9, last_token_ts=mono - 1))
            for i in range(N)]


def sglang_results(now: float) -> list:
    return [sglang_result(id=f"s{i}", prompt_tokens=128, completion_tokens=200, cached_tokens=0,
                          finish_reason={"type": "stop", "matched": 2}, e2e_latency=4.0, request_received_ts=now - 5,
                          request_finished_ts=now - 1, first_token_latency=0.1, queue_time=0.01,
                          forward_entry_time=now - 4.99, prefill_finished_time=now - 4.9, weight_version="default")
            for i in range(N)]


def best(samples: list[float]) -> float:
    return min(samples)


def measure(prof: IntegratedProfiler, items: list, repeat: int) -> tuple[float, float]:
    """(best training-thread seconds of record_samples, best seconds of the write at step())."""
    call, write = [], []
    for _ in range(repeat):
        t0 = time.perf_counter()
        prof.record_samples(items)
        call.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        prof.step()
        write.append(time.perf_counter() - t0)
    return best(call), best(write)


def python_work(n: int = 1_000_000) -> float:
    """A training thread's own Python (seconds it takes): long enough for the writer's whole run to
    fall inside it, so that the difference is what the writer took from it."""
    t0 = time.perf_counter()
    acc = 0
    for i in range(n):
        acc += i & 7
    return time.perf_counter() - t0


def background_cost(prof: IntegratedProfiler, items: list, repeat: int) -> tuple[float, float, float]:
    """The write on a writer thread (started once, woken through a queue): (best hand-off seconds
    on the training thread, best seconds of the training thread's Python alone, best seconds of it
    while the writer converts and writes: the GIL is shared)."""
    rec = recorder_of(prof)
    jobs: queue.Queue = queue.Queue()
    done = threading.Event()

    def writer() -> None:
        while jobs.get() is not None:
            rec.flush()
            done.set()

    th = threading.Thread(target=writer, daemon=True)
    th.start()
    handoff, alone, contended = [], [], []
    for _ in range(repeat):
        alone.append(python_work())
        prof.record_samples(items)
        done.clear()
        t0 = time.perf_counter()
        jobs.put(True)
        handoff.append(time.perf_counter() - t0)
        contended.append(python_work())
        done.wait()
    jobs.put(None)
    th.join()
    return best(handoff), best(alone), best(contended)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=30)
    args = ap.parse_args(argv)
    save = tempfile.mkdtemp(prefix="bench_record_samples_")
    cfg = load_config({"integrated": {"profile": False, "profile_save_path": save}, "metrics": {"enable": True}})
    prof = IntegratedProfiler(cfg, role="bench", rank=0, world_size=1)
    prof.start()
    now = time.time()
    cases = {"plain dicts": plain_dicts(now), "vLLM RequestOutputs (metrics set)": vllm_outputs(now),
             "SGLang result dicts (enable_metrics keys)": sglang_results(now)}
    print(f"machine: {platform.machine()}, {platform.processor() or 'cpu'}, Python {platform.python_version()}, "
          f"{N} samples per call, best of {args.repeat}")
    print(f"{'input':44} {'training thread':>16} {'write at step()':>16}")
    for name, items in cases.items():
        call, write = measure(prof, items, args.repeat)
        print(f"{name:44} {call * 1e3:13.3f} ms {write * 1e3:13.3f} ms")
    handoff, alone, contended = background_cost(prof, cases["plain dicts"], args.repeat)
    print(f"write on a writer thread (plain dicts): hand-off {handoff * 1e3:.3f} ms; a training thread running Python "
          f"meanwhile: {alone * 1e3:.1f} ms alone, {contended * 1e3:.1f} ms beside the writer "
          f"(+{(contended - alone) * 1e3:.1f} ms: the GIL)")
    prof.stop()
    shutil.rmtree(save, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
