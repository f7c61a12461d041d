"""Per-sample record files in docs/rollout.md's format ("The record format"), written here for the
long-tail tests: `write_worker(save, role, rank, batches)`, each batch (iteration, stage, samples),
each sample a dict of the sample line's fields (the rest null)."""
from __future__ import annotations

import json
from pathlib import Path

from mindspeed_profiler.core import formats

T0 = 1_764_835_200_000_000_000   # a wall-clock ns origin (2025-12-04)
MS = 1_000_000

SAMPLE_FIELDS = ("id", "prompt_tokens", "response_tokens", "start_ns", "first_token_ns", "end_ns", "finish_reason",
                 "truncated", "policy_version", "reward_s", "tool_s", "queue_s", "prefill_s", "decode_s", "problem")


def sample(sid, start_ms: float, end_ms: float, tokens: int | None = None, finish_reason: str = "stop", **kw) -> dict:
    """One sample, times in ms after T0 (first token 1 ms after the start)."""
    start, end = T0 + round(start_ms * MS), T0 + round(end_ms * MS)
    rec = {"id": str(sid), "prompt_tokens": 8, "response_tokens": tokens, "start_ns": start,
           "first_token_ns": min(start + MS, end), "end_ns": end, "finish_reason": finish_reason,
           "truncated": finish_reason == "length"}
    rec.update(kw)
    return rec


def lines_of(role: str, rank: int, batches) -> list[str]:
    out = []
    for iteration, stage, samples in batches:
        out.append(json.dumps({"type": formats.SAMPLE_BATCH, "v": formats.SAMPLES_SCHEMA, "role": role, "rank": rank,
                               "iteration": iteration, "stage": stage, "samples": len(samples), "dropped": 0,
                               "recorded_ns": T0, "source": "dict", "clock": "wall", "problems": []}))
        for s in samples:
            out.append(json.dumps({"type": formats.SAMPLE_RECORD, "iteration": iteration, "stage": stage,
                                   **{k: s.get(k) for k in SAMPLE_FIELDS}}))
    return out


def write_worker(save: Path, role: str, rank: int, batches, extra_lines=()) -> Path:
    d = Path(save) / formats.SAMPLES_DIR
    d.mkdir(parents=True, exist_ok=True)
    path = d / formats.samples_file_name(role, rank)
    path.write_text("\n".join([*lines_of(role, rank, batches), *extra_lines]) + "\n")
    return path


def long_tail_batch(n: int = 16, every: int = 8, short_ms: float = 10.0, factor: float = 8.0, tokens: int = 4,
                    long_tokens: int = 64) -> list[dict]:
    """One sample in `every` runs `factor` times longer (and to `long_tokens`, truncated) than the
    others, which stop early: the GRPO example's long-tail knob."""
    return [sample(i, 0, short_ms * factor, long_tokens, "length") if i % every == every - 1
            else sample(i, 0, short_ms, tokens) for i in range(n)]


def uniform_batch(n: int = 64, top_ms: float = 100.0) -> list[dict]:
    """Lengths spread evenly over [1, L]: durations (i + 1) / n of the longest, tokens alike."""
    return [sample(i, 0, top_ms * (i + 1) / n, i + 1) for i in range(n)]


def rollout_run(save: Path) -> Path:
    """A save path with two workers' samples over two iterations: a long tail (iteration 1), lengths
    spread evenly (iteration 2), the engine's queue / prefill / decode split given, one sample
    without times and one corrupt line (every field of the long tail's rows has a value)."""
    split = {"queue_s": 0.001, "prefill_s": 0.002, "decode_s": 0.005}
    for rank in (0, 1):
        tail = [dict(s, **split) for s in long_tail_batch()] + [sample("no-times", 0, 0, 3, start_ns=None, end_ns=None)]
        write_worker(save, "actor", rank, [(1, "actor_generate", tail), (2, "actor_generate", uniform_batch(16))],
                     extra_lines=['{"type": "sample", "iteration": 2, "sta'] if rank else ())
    return Path(save)
