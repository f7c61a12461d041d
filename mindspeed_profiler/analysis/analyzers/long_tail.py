"""The long tail of a rollout, from the per-sample records (parsing/samples.py): per batch (one run's
samples of one iteration and stage, across its workers) the occupancy over time, the times for 50 /
90 / 100 % of the samples to finish, the capacity lost to the tail, response lengths, the engine's
queue / prefill / decode split and the slowest samples. Pure; the definitions are docs/rollout.md
"The long tail: definitions" (a test recomputes them from the raw JSON lines).

    long_tail(samples, top_n, dropped) -> {"batches", "occupancy", "lengths", "slowest"}: the rows of
    ROLLOUT_BATCHES, ROLLOUT_OCCUPANCY, ROLLOUT_LENGTHS and ROLLOUT_SLOWEST (summary.json
    captures[*].rollout.<list>, one capture of kind `samples` per samples/ folder)
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Iterable, Optional

import numpy as np

from mindspeed_profiler.analysis.models.rows import Field, RowModel, each_capture, inside, worker_name

if TYPE_CHECKING:   # the types only: their dataclasses cost 3 ms of every analysis's start, most without samples
    from mindspeed_profiler.analysis.parsing.samples import Sample, SampleBatch

MAX_CURVE_POINTS = 200    # occupancy points per batch in the summary: the report draws ~200 px per curve
LENGTH_BINS = 20          # response-length histogram bins per batch (equal width from 0 to the longest)
NS = 1e9

BatchKey = tuple   # (run_id: str, iteration: int, stage: str)


def batch_key(s: Sample | SampleBatch, default_run: str = "") -> BatchKey:
    """A sample's (or a batch line's) batch: its run (the batch line's run_id, else `default_run`: the save path's),
    iteration and stage."""
    return (s.run_id or default_run, s.iteration, s.stage)


def nearest_rank(sorted_values: list, q: float):
    """The q-quantile by nearest rank: the ceil(q * n)-th smallest (at least the first); None when empty."""
    if not sorted_values:
        return None
    return sorted_values[max(1, math.ceil(q * len(sorted_values))) - 1]


def occupancy_points(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The step curve of samples running: (t_ns since the first start, running from t on) at each
    time it changes; the last point is (window, 0). A sample runs over [start, end)."""
    if not spans:
        return []
    n = len(spans)
    starts = np.fromiter((a for a, _ in spans), dtype=np.int64, count=n)
    ends = np.fromiter((b for _, b in spans), dtype=np.int64, count=n)
    t0 = int(starts.min())
    times, at = np.unique(np.concatenate([starts, ends]) - t0, return_inverse=True)
    delta = np.bincount(at, weights=np.concatenate([np.ones(n), -np.ones(n)]), minlength=len(times))
    keep = delta != 0   # one sample ends as another starts: no change
    keep[0] = True
    running = np.rint(np.cumsum(delta)).astype(np.int64)
    return list(zip(times[keep].tolist(), running[keep].tolist()))


def downsample(points: list[tuple[int, int]], max_points: int = MAX_CURVE_POINTS) -> list[tuple[int, float]]:
    """At most `max_points` points: the curve as it is when it has that few changes, else the
    time-weighted mean of samples running in each of max_points - 1 equal bins (so the mean
    occupancy of the drawn curve is the batch's), the closing (window, 0) kept."""
    if len(points) <= max_points:
        return [(t, float(r)) for t, r in points]
    t = np.array([p[0] for p in points], dtype=np.float64)
    r = np.array([p[1] for p in points], dtype=np.float64)
    window, n_bins = points[-1][0], max_points - 1
    area = np.concatenate([[0.0], np.cumsum(r[:-1] * np.diff(t))])   # the integral of running up to each change
    edges = np.linspace(0.0, float(window), n_bins + 1)
    means = np.diff(np.interp(edges, t, area)) / (window / n_bins)    # the integral is linear between changes
    return [(round(e), float(m)) for e, m in zip(edges[:-1].tolist(), means.tolist())] + [(window, 0.0)]


def _mean(values: list) -> Optional[float]:
    return sum(values) / len(values) if values else None


def _share(part: float, whole: float) -> Optional[float]:
    return part / whole if whole > 0 else None


def batch_rows(key: BatchKey, samples: list[Sample], dropped: int, top_n: int) -> dict:
    """One batch's rows of the four models: {"batch": row, "occupancy": [...], "lengths": [...], "slowest": [...]}."""
    run_id, iteration, stage = key
    timed = [s for s in samples if s.timed]
    spans = [(s.start_ns, s.end_ns) for s in timed]
    n = len(timed)
    t0 = min((a for a, _ in spans), default=None)
    window = max(b for _, b in spans) - t0 if spans else None
    ends = sorted(b - t0 for _, b in spans) if spans else []
    busy = sum(b - a for a, b in spans)
    lost = window - busy / n if n else None
    tokens = sorted(s.response_tokens for s in samples if s.response_tokens is not None)
    judged = [s for s in samples if s.truncated is not None]
    cut = [s for s in judged if s.truncated]
    cut_busy = sum(s.end_ns - s.start_ns for s in timed if s.truncated)
    lat = [(s, (s.end_ns - s.start_ns) / NS) for s in timed]
    queued = [(s.queue_s, d) for s, d in lat if s.queue_s is not None]
    q = {f: _mean([getattr(s, f) for s in samples if getattr(s, f) is not None]) for f in ("queue_s", "prefill_s", "decode_s")}
    preempt = [s.preemptions for s in samples if s.preemptions is not None]
    ident = {"run_id": run_id, "iteration": iteration, "stage": stage}
    batch = ROLLOUT_BATCHES.row(
        **ident, workers=len({(s.role, s.rank) for s in samples}), samples=len(samples), timed=n,
        untimed=len(samples) - n, dropped=dropped, start_us=t0 / 1e3 if t0 is not None else None,
        window_s=window / NS if window is not None else None,
        t50_s=_s(nearest_rank(ends, 0.5)), t90_s=_s(nearest_rank(ends, 0.9)), t100_s=_s(nearest_rank(ends, 1.0)),
        mean_occupancy=_share(busy, n * window) if n and window else (1.0 if n else None),
        tail_lost_s=lost / NS if lost is not None else None,
        tail_lost_share=_share(lost, window) if lost is not None and window else (0.0 if n else None),
        latency_mean_s=_mean([d for _, d in lat]), ttft_mean_s=_mean([(s.first_token_ns - s.start_ns) / NS
                                                                     for s in timed if s.first_token_ns is not None]),
        queue_mean_s=q["queue_s"], prefill_mean_s=q["prefill_s"], decode_mean_s=q["decode_s"],
        queue_share=_share(sum(x for x, _ in queued), sum(d for _, d in queued)), queue_known=len(queued),
        known_lengths=len(tokens), tokens_p50=nearest_rank(tokens, 0.5), tokens_p90=nearest_rank(tokens, 0.9),
        tokens_p99=nearest_rank(tokens, 0.99), tokens_max=tokens[-1] if tokens else None,
        truncated=len(cut), truncation_known=len(judged), truncated_share=_share(len(cut), len(judged)), truncated_time_share=_share(cut_busy, busy),
        preemptions=sum(preempt) if preempt else None, preempted=sum(1 for p in preempt if p > 0) if preempt else None)
    curve = [ROLLOUT_OCCUPANCY.row(**ident, t_s=t / NS, running=r, occupancy=r / n)
             for t, r in downsample(occupancy_points(spans))] if n else []
    slowest = sorted(lat, key=lambda x: (-x[1], x[0].id))[:max(top_n, 0)]
    return {"batch": batch, "occupancy": curve, "lengths": length_bins(ident, samples, tokens),
            "slowest": [ROLLOUT_SLOWEST.row(
                **ident, position=i, worker=worker_name(s.role, s.rank), sample_id=s.id, latency_s=d,
                start_s=(s.start_ns - t0) / NS, ttft_s=(s.first_token_ns - s.start_ns) / NS if s.first_token_ns is not None else None,
                response_tokens=s.response_tokens, finish_reason=s.finish_reason, queue_s=s.queue_s,
                preemptions=s.preemptions)
                for i, (s, d) in enumerate(slowest)]}


def _s(ns: Optional[int]) -> Optional[float]:
    return ns / NS if ns is not None else None


def length_bins(ident: dict, samples: list[Sample], tokens: list[int], n_bins: int = LENGTH_BINS) -> list[dict]:
    """The response-length histogram: bins of one integer width w = ceil((longest + 1) / n_bins),
    each [lo, hi) tokens (at most n_bins of them, the last holding the longest)."""
    if not tokens:
        return []
    width = max(1, math.ceil((tokens[-1] + 1) / n_bins))
    n = tokens[-1] // width + 1
    counts, cut = [0] * n, [0] * n
    for s in samples:
        if s.response_tokens is not None:
            counts[s.response_tokens // width] += 1
            cut[s.response_tokens // width] += bool(s.truncated)
    return [ROLLOUT_LENGTHS.row(**ident, bin=i, lo_tokens=i * width, hi_tokens=(i + 1) * width,
                                count=counts[i], truncated=cut[i]) for i in range(n)]


def long_tail(samples: Iterable[Sample], top_n: int, dropped: dict | None = None, default_run: str = "") -> dict:
    """Every batch's rows, batches in (run, iteration, stage) order. `dropped`: batch key -> the
    samples the writers did not write (their batch lines' `dropped`); `default_run`: the run of
    the samples whose batch line names none."""
    groups: dict[BatchKey, list[Sample]] = {}
    for s in samples:
        groups.setdefault(batch_key(s, default_run), []).append(s)
    out: dict[str, list] = {"batches": [], "occupancy": [], "lengths": [], "slowest": []}
    for key in sorted(groups, key=lambda k: (k[0], k[1], k[2])):
        rows = batch_rows(key, groups[key], (dropped or {}).get(key, 0), top_n)
        out["batches"].append(rows["batch"])
        for k in ("occupancy", "lengths", "slowest"):
            out[k].extend(rows[k])
    return out


# -- the row models (summary.json captures[*].rollout.<list>, kind `samples`)

WHERE = "captures[*].rollout.{} (kind samples: samples/<role>_rank<R>.jsonl)"
_BATCH = (
    Field("run_id", "text", "the run (the batch lines' run_id, else the save path's run.json; empty when neither says)"),
    Field("iteration", "iteration", "the profiler's iteration"),
    Field("stage", "text", "the stage the samples were generated in"),
)

ROLLOUT_BATCHES = RowModel(
    "rollout_batches", "(run, iteration, stage) of the per-sample records, across the workers",
    WHERE.format("batches"), table="rollout_batches", method="rollout_batches",
    select=each_capture(inside("rollout", "batches")), fields=(
        *_BATCH,
        Field("workers", "count", "workers that recorded samples of it"),
        Field("samples", "count", "sample records"),
        Field("timed", "count", "samples with a start and an end and no problem: the times below are theirs"),
        Field("untimed", "count", "samples with a problem or without a start / end: left out of the times"),
        Field("dropped", "count", "samples the writers did not write (over formats.MAX_SAMPLES_PER_ITERATION)"),
        Field("start_us", "us", "the first start, us since the epoch"),
        Field("window_s", "s", "the generation window: the first start to the last end"),
        Field("t50_s", "s", "from the first start until half the samples had ended (nearest rank)"),
        Field("t90_s", "s", "... until 90% had ended"),
        Field("t100_s", "s", "... until all had ended (= window_s)"),
        Field("mean_occupancy", "share", "sum(end - start) / (timed x window): the share of generation capacity used"),
        Field("tail_lost_s", "s", "the capacity lost to the tail: window - sum(end - start) / timed"),
        Field("tail_lost_share", "share", "tail_lost_s / window_s (= 1 - mean_occupancy)"),
        Field("latency_mean_s", "s", "mean end - start"),
        Field("ttft_mean_s", "s", "mean first_token - start, over the samples with a first token"),
        Field("queue_mean_s", "s", "mean queue_s where the engine gives it"),
        Field("prefill_mean_s", "s", "mean prefill_s where given"),
        Field("decode_mean_s", "s", "mean decode_s where given"),
        Field("queue_share", "share", "sum(queue_s) / sum(end - start) over the timed samples with a queue_s"),
        Field("queue_known", "count", "timed samples with a queue_s (queue_share is theirs)"),
        Field("known_lengths", "count", "samples with a response length (untimed ones included)"),
        Field("tokens_p50", "count", "response tokens, median (nearest rank)"),
        Field("tokens_p90", "count", "response tokens, 90th percentile"),
        Field("tokens_p99", "count", "response tokens, 99th percentile"),
        Field("tokens_max", "count", "response tokens, the longest"),
        Field("truncated", "count", "samples that stopped at their token limit (finish_reason length)"),
        Field("truncation_known", "count", "samples whose truncation is known (truncated, else finish_reason)"),
        Field("truncated_share", "share", "truncated / the samples whose truncation is known"),
        Field("truncated_time_share", "share", "the truncated samples' share of sum(end - start)"),
        Field("preemptions", "count", "times the engine preempted the batch's samples (vLLM's num_preemptions), "
                                      "summed over the samples that say; null when none says"),
        Field("preempted", "count", "samples preempted at least once"),
    ))

ROLLOUT_OCCUPANCY = RowModel(
    "rollout_occupancy", "point of a batch's occupancy curve (at most 200 per batch)", WHERE.format("occupancy"),
    table="rollout_occupancy", method="rollout_occupancy", select=each_capture(inside("rollout", "occupancy")), fields=(
        *_BATCH,
        Field("t_s", "s", "since the batch's first start"),
        Field("running", "number", "samples running from t_s to the next point (a time-weighted mean per bin when "
                                   "the curve had more than 200 changes)"),
        Field("occupancy", "share", "running / the batch's timed samples"),
    ))

ROLLOUT_LENGTHS = RowModel(
    "rollout_lengths", "bin of a batch's response-length histogram", WHERE.format("lengths"),
    table="rollout_lengths", method="rollout_lengths", select=each_capture(inside("rollout", "lengths")), fields=(
        *_BATCH,
        Field("bin", "index", "0 for the shortest"),
        Field("lo_tokens", "count", "response tokens from (inclusive)"),
        Field("hi_tokens", "count", "to (exclusive); every bin is as wide"),
        Field("count", "count", "samples in the bin"),
        Field("truncated", "count", "of which truncated"),
    ))

ROLLOUT_SLOWEST = RowModel(
    "rollout_slowest", "of a batch's slowest samples (top N, --top)", WHERE.format("slowest"),
    table="rollout_slowest", method="rollout_slowest", select=each_capture(inside("rollout", "slowest")), fields=(
        *_BATCH,
        Field("position", "count", "0 for the slowest"),
        Field("worker", "text", "role:rank of the worker that recorded it"),
        Field("sample_id", "text", "the request's id"),
        Field("latency_s", "s", "end - start"),
        Field("start_s", "s", "its start, since the batch's first start"),
        Field("ttft_s", "s", "first_token - start"),
        Field("response_tokens", "count", "its response length"),
        Field("finish_reason", "text", "stop, length, abort, ..."),
        Field("queue_s", "s", "its time in the engine's queue, where given"),
        Field("preemptions", "count", "times the engine preempted it, where given"),
    ))
