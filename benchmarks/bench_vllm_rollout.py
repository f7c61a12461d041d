#!/usr/bin/env python3
"""What the profiler costs a rollout worker per iteration on a real vLLM engine (vLLM 0.32's CPU
build, a tiny Qwen2 model built locally, tests/vllm_testutil.py): the per-sample records
(`record_samples` of the iteration's RequestOutputs, then the write at `step()`) and an attached
engine capture that is idle (the observer's decision at each stage call, outside the capture
window), against the generation itself (`llm.generate` of the iteration's requests, as the GRPO
example sends them: 32 samples, one request each, up to 10 tokens).

Each iteration times the three separately, in the order a rollout runs them, under a profiler with
`profile: true` (what attaching an engine needs) whose window is at step 10,000 (the engine attached
and never selected), the tracer and the metrics tracker off: their costs are their own
(bench_tracer.py, bench_memory.py), not the records' nor the engine's. Figures are medians over the iterations (noise from the machine's other processes lands
in a few iterations; the median keeps the typical one). The goal (issue 44): the profiler's part
under 1% of the generation time.

    python benchmarks/bench_vllm_rollout.py                 # print the table
    python benchmarks/bench_vllm_rollout.py --write         # and write docs/perf_rollout.md's region
"""
from __future__ import annotations

import argparse
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))   # the tiny model and the engine of the real-engine tests

from vllm_testutil import END, prompts, real_llm, tiny_qwen2  # noqa: E402

from mindspeed_profiler import IntegratedProfiler, load_config  # noqa: E402
from mindspeed_profiler.engines.attach import attach_engine, engine_profiler_args  # noqa: E402

SAMPLES, MAX_TOKENS = 32, 10


class _Unstarted:
    """An engine with vLLM 0.32's profile methods that must never be called: what an attached engine
    costs a stage call outside its capture window is the observer's decision alone."""

    def start_profile(self, profile_prefix=None, *, delay_iterations=None, max_iterations=None):
        raise AssertionError("the engine was started outside the window")

    def stop_profile(self):
        raise AssertionError("the engine was stopped outside the window")


def observer_us(cfg, rounds: int = 10, calls: int = 500) -> tuple[float, float]:
    """(median us of a stage call, the same with an engine attached): two profilers, their calls
    interleaved in rounds, so that the machine's load falls on both alike."""
    profs = []
    for attach in (False, True):
        prof = IntegratedProfiler(cfg, role="rollout", rank=0, world_size=1)
        if attach:
            attach_engine(prof, _Unstarted(), kind="vllm", device="cpu")
        prof.start()
        profs.append(prof)
    times: list[list[float]] = [[], []]
    for _ in range(rounds):
        for i, prof in enumerate(profs):
            for _ in range(calls):
                t0 = time.perf_counter()
                with prof.stage("actor_generate"):
                    pass
                times[i].append(time.perf_counter() - t0)
    for prof in profs:
        prof.stop()
    return statistics.median(times[0]) * 1e6, statistics.median(times[1]) * 1e6


def run(iterations: int) -> dict[str, float]:
    from vllm import SamplingParams

    work = Path(tempfile.mkdtemp(prefix="bench-vllm-"))
    model = tiny_qwen2(work / "model")
    cfg = load_config({"integrated": {"profile": True, "profile_save_path": str(work / "prof"), "backend": "markers",
                                      "stage": "actor_generate", "profile_step_start": 10_000,
                                      "profile_step_end": 10_001}})
    params = SamplingParams(max_tokens=MAX_TOKENS, temperature=1.0, stop_token_ids=[END])
    reqs = prompts(SAMPLES)
    gen, stage, record, step = [], [], [], []
    with real_llm(model, **engine_profiler_args(cfg, engine="vllm")["kwargs"]) as llm:
        prof = IntegratedProfiler(cfg, role="rollout", rank=0, world_size=1)
        attach_engine(prof, llm)
        prof.start()
        llm.generate(reqs, params, use_tqdm=False)   # warm
        for _ in range(iterations):
            t0 = time.perf_counter()
            scope = prof.stage("actor_generate")
            scope.__enter__()
            t1 = time.perf_counter()
            outs = llm.generate(reqs, params, use_tqdm=False)
            t2 = time.perf_counter()
            prof.record_samples(outs, stage="actor_generate")
            t3 = time.perf_counter()
            scope.__exit__(None, None, None)
            t4 = time.perf_counter()
            prof.step()
            t5 = time.perf_counter()
            gen.append(t2 - t1)
            stage.append((t1 - t0) + (t4 - t3))
            record.append(t3 - t2)
            step.append(t5 - t4)
        prof.stop()
    med = statistics.median
    bare_us, attached_us = observer_us(cfg)
    out = {"generate_ms": med(gen) * 1e3, "stage_us": med(stage) * 1e6, "record_us": med(record) * 1e6,
           "step_us": med(step) * 1e6, "observer_us": attached_us - bare_us, "tracker_stage_us": bare_us}
    out["profiler_us"] = out["stage_us"] + out["record_us"] + out["step_us"]
    out["share"] = out["profiler_us"] / 1e3 / out["generate_ms"]
    return out


def table(r: dict[str, float], iterations: int) -> str:
    import vllm

    return "\n".join([
        f"Measured on {platform.machine()} ({platform.python_version()}), vLLM {vllm.__version__} (CPU build), "
        f"{iterations} iterations of {SAMPLES} requests x up to {MAX_TOKENS} tokens, medians:",
        "",
        "| per iteration | time | share of the generation |",
        "|---|---|---|",
        f"| `llm.generate` ({SAMPLES} requests) | {r['generate_ms']:.1f} ms | 100% |",
        f"| the stage's entry and exit with the engine attached, idle | {r['stage_us']:.0f} us | {r['stage_us'] / 1e3 / r['generate_ms']:.3%} |",
        f"| ... of which the attached engine's decision (a stage call with it, less one without: {r['observer_us'] + r['tracker_stage_us']:.1f} - {r['tracker_stage_us']:.1f} us, 5,000 interleaved calls each) | {r['observer_us']:.1f} us | {r['observer_us'] / 1e3 / r['generate_ms']:.4%} |",
        f"| `record_samples` of the {SAMPLES} RequestOutputs (training thread) | {r['record_us']:.0f} us | {r['record_us'] / 1e3 / r['generate_ms']:.3%} |",
        f"| `step()`: the records checked, converted and written | {r['step_us']:.0f} us | {r['step_us'] / 1e3 / r['generate_ms']:.3%} |",
        f"| **the profiler's part** | **{r['profiler_us']:.0f} us** | **{r['share']:.2%}** (goal: under 1%) |",
    ])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--iterations", type=int, default=60)
    p.add_argument("--write", action="store_true", help="write docs/perf_rollout.md's generated region")
    args = p.parse_args(argv)
    r = run(args.iterations)
    text = table(r, args.iterations)
    print(text)
    if args.write:
        from doc_section import write_region

        write_region(REPO / "docs" / "perf_rollout.md", "bench_vllm_rollout.py", text,
                     "## The profiler on a real vLLM rollout", "# The rollout on a real engine: what the profiler costs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
