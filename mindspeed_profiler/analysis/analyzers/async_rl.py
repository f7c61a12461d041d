"""Asynchronous RL in the analysis (docs/async.md): the `async/*` keys of the tracker files (written
per trainer iteration by an async trainer, metrics/async_rl.py) as the rows of ASYNC_ITERATIONS,
and the advisor's rules on them: rollout-bound or trainer-bound (which group waits, how much, what
to change), weight sync exposed (its share of the iteration, its largest phase), staleness past the
bound. Pure: each `*_findings(summary)` gives the arguments of the advisor's findings (id, title,
impact, evidence, action, anchor); advisor.py registers one rule per function (`DOCS`).

Steady iterations: the first iteration's wait (nothing generated yet) and the last one's rollout
idleness (nothing left to generate) are the pipeline filling and draining, not a bottleneck; the
rules average the iterations between them (all of them when there are fewer than 3).
"""
from __future__ import annotations

from typing import Iterator

from mindspeed_profiler.core.formats import ASYNC_METRICS_PREFIX as PREFIX, WEIGHT_SYNC_PHASES as SYNC_PHASES
from mindspeed_profiler.analysis.analyzers.tracker_metrics import TRACKER_METRICS
from mindspeed_profiler.analysis.models.rows import Field, Record, RowModel

IDLE_SHARE = 0.25          # a group waiting this share of the steady iterations is the one kept waiting
SYNC_EXPOSED_SHARE = 0.05  # the trainer waiting for the weight sync this share of its iterations
DOC = "async.md"

# field -> the tracker key it reads (without the async/ prefix: the same name)
_KEYS = ("trainer_wait_s", "trainer_idle_ratio", "rollout_busy_s", "rollout_idle_ratio", "weight_sync_s",
         *(f"weight_sync_{p}_s" for p in SYNC_PHASES), "weight_sync_exposed_s", "policy_version", "max_staleness",
         "samples", "stale_samples", "staleness_mean", "staleness_min", "staleness_max", "over_bound_samples")
_UNITS = {"trainer_idle_ratio": "share", "rollout_idle_ratio": "share", "policy_version": "count",
          "max_staleness": "count", "samples": "count", "stale_samples": "count", "staleness_min": "count",
          "staleness_max": "count", "over_bound_samples": "count", "staleness_mean": "number"}
_DOCS = {
    "trainer_wait_s": "seconds the trainer waited for its batch (exposed generation)",
    "trainer_idle_ratio": "trainer_wait_s / iteration_s",
    "rollout_busy_s": "seconds of the iteration the rollout group generated or took weights (union of its spans)",
    "rollout_idle_ratio": "1 - rollout_busy_s / iteration_s (waiting for weights or for work)",
    "weight_sync_s": "gather + convert + transfer + load of the weights sent after this update",
    "weight_sync_gather_s": "actor rank 0 copies its weights into the object store",
    "weight_sync_convert_s": "... in Hugging Face names and layouts, for an inference engine (0: the rollout takes Megatron's)",
    "weight_sync_transfer_s": "the rollout fetches them",
    "weight_sync_load_s": "the rollout loads them into its model",
    "weight_sync_exposed_s": "the part of the sync the trainer waited for",
    "policy_version": "the version the update trained (updates before it)",
    "max_staleness": "the bound on a trained sample's version gap",
    "samples": "samples trained", "stale_samples": "samples with a version gap > 0",
    "staleness_mean": "mean version gap", "staleness_min": "smallest version gap", "staleness_max": "largest version gap",
    "over_bound_samples": "samples with a version gap > max_staleness",
}


def _async_rows(summary: dict) -> Iterator[Record]:
    """One row per (tracker file with async/ keys, iteration)."""
    per: dict[tuple, dict] = {}
    for r in TRACKER_METRICS.rows(summary):
        metric = str(r.get("metric") or "")
        key = (r.get("path"), r.get("iteration"))
        if metric.startswith(PREFIX) or metric == "timing_s/iteration":
            per.setdefault(key, {"path": r.get("path"), "role": r.get("role"), "rank": r.get("rank"),
                                 "iteration": r.get("iteration")})[metric] = r.get("value")
    for (_, _), m in sorted(per.items(), key=lambda kv: (str(kv[0][0]), kv[0][1] or 0)):
        if not any(k.startswith(PREFIX) for k in m):
            continue
        raw = {"path": m["path"], "role": m["role"], "rank": m["rank"], "iteration": m["iteration"],
               "iteration_s": m.get("timing_s/iteration"), **{k: m.get(PREFIX + k) for k in _KEYS}}
        yield None, None, raw


ASYNC_ITERATIONS = RowModel(
    "async_iterations", "(trainer, iteration) of an asynchronous run (the tracker's async/* keys, docs/async.md)",
    "captures[*].tracker.rows[*] with async/* metrics (computed)", table="async_iterations",
    method="async_iterations", per_capture=False, select=_async_rows, fields=(
        Field("path", "text", "the tracker file"), Field("role", "text", "its worker (the driver)"),
        Field("rank", "rank", "its rank"), Field("iteration", "iteration", "the trainer iteration"),
        Field("iteration_s", "s", "its wall time (timing_s/iteration)"),
        *(Field(k, _UNITS.get(k, "s"), _DOCS[k]) for k in _KEYS),
    ))


def steady(rows: list[dict]) -> list[dict]:
    """The iterations between the first and the last (all of them when fewer than 3): the module doc."""
    rows = sorted(rows, key=lambda r: r.get("iteration") or 0)
    return rows[1:-1] if len(rows) >= 3 else rows


def _mean(rows: list[dict], key: str) -> float:
    vals = [r[key] for r in rows if isinstance(r.get(key), (int, float))]
    return sum(vals) / len(vals) if vals else 0.0


def _runs(summary: dict) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for r in ASYNC_ITERATIONS.rows(summary):
        out.setdefault(str(r.get("path")), []).append(r)
    return out


def bottleneck_findings(summary: dict) -> list[tuple]:
    """rollout_bound / trainer_bound: the group that keeps the other waiting."""
    out = []
    for path, rows in _runs(summary).items():
        st = steady(rows)
        trainer_idle, rollout_idle = _mean(st, "trainer_idle_ratio"), _mean(st, "rollout_idle_ratio")
        bound = max(_mean(st, "max_staleness"), 0)
        ev = {"table": "async_iterations", "path": path, "iterations": [r["iteration"] for r in st],
              "trainer_idle_ratio": trainer_idle, "rollout_idle_ratio": rollout_idle,
              "trainer_wait_s": _mean(st, "trainer_wait_s"), "iteration_s": _mean(st, "iteration_s"),
              "max_staleness": bound}
        if trainer_idle >= IDLE_SHARE and trainer_idle > rollout_idle:
            out.append(("rollout_bound", f"rollout-bound: the trainer waits {trainer_idle:.0%} of each iteration "
                        f"for its batch (the rollout group idles {rollout_idle:.0%})", trainer_idle, ev,
                        "generation is the bottleneck: more rollout replicas (or a faster engine: larger batches, "
                        "shorter responses), a larger staleness bound (grpo.max_staleness / verl's staleness_threshold"
                        f", now {bound:g}) so the rollout runs further ahead, or move devices from the trainer to "
                        "the rollout group", "rollout-bound-or-trainer-bound"))
        elif rollout_idle >= IDLE_SHARE and rollout_idle > trainer_idle:
            out.append(("trainer_bound", f"trainer-bound: the rollout group idles {rollout_idle:.0%} of each "
                        f"iteration waiting for new weights (the trainer waits {trainer_idle:.0%})", rollout_idle, ev,
                        "the update is the bottleneck: fewer update epochs (grpo.update_epochs / ppo_epochs), "
                        "larger micro batches, more trainer devices (fewer rollout replicas), or a larger staleness "
                        "bound if the rollout only waits in bursts", "rollout-bound-or-trainer-bound"))
    return out


def sync_findings(summary: dict) -> list[tuple]:
    """weight_sync_exposed: the trainer waits for the weight sync a notable share of its iterations."""
    out = []
    for path, rows in _runs(summary).items():
        st = steady(rows)
        wall = _mean(st, "iteration_s")
        exposed = _mean(st, "weight_sync_exposed_s")
        share = exposed / wall if wall > 0 else 0.0
        if share < SYNC_EXPOSED_SHARE:
            continue
        phases = {p: _mean(st, f"weight_sync_{p}_s") for p in SYNC_PHASES}
        worst = max(phases, key=phases.get)
        out.append(("weight_sync_exposed", f"weight sync exposed: the trainer waits {share:.0%} of each iteration "
                    f"for it (largest phase: {worst}, {phases[worst]:.3f} s)", share,
                    {"table": "async_iterations", "path": path, "exposed_s": exposed, "iteration_s": wall,
                     "phases_s": phases, "largest_phase": worst},
                    "send fewer bytes or overlap them: bucketed / sharded transfers (NCCL/HCCL broadcast instead of "
                    "the object store), resharding on the device, sending only what changed, or a sync that the "
                    "trainer does not wait for", "weight-sync"))
    return out


def staleness_findings(summary: dict) -> list[tuple]:
    """staleness_past_bound: samples trained more than max_staleness versions after their policy."""
    out = []
    for path, rows in _runs(summary).items():
        over = [r for r in rows if (r.get("over_bound_samples") or 0) > 0]
        if not over:
            continue
        n_over = sum(r["over_bound_samples"] for r in over)
        n_all = sum(r.get("samples") or 0 for r in rows) or n_over
        worst = max(over, key=lambda r: r.get("staleness_max") or 0)
        out.append(("staleness_past_bound", f"{n_over:g} trained samples are staler than the bound "
                    f"({worst.get('staleness_max')} versions > {worst.get('max_staleness')}) in "
                    f"{len(over)} iterations", n_over / n_all,
                    {"table": "async_iterations", "path": path, "over_bound_samples": n_over, "samples": n_all,
                     "iterations": [r["iteration"] for r in over], "staleness_max": worst.get("staleness_max")},
                    "the trainer took batches older than it allows: check the rollout's version bookkeeping (the "
                    "weights it loaded vs the version it reports) and the queue that gates generation on the bound",
                    "staleness"))
    return out


DOCS = {
    "rollout_bound": dict(
        triggers=("an asynchronous run's trainer waits for its batch (the tracker's `async/trainer_idle_ratio`, mean "
                  "over the steady iterations: not the first nor the last) 25% or more of each iteration, and more "
                  "than the rollout group idles (docs/async.md)"),
        impact="that idle share of the trainer", reads="`async_iterations`"),
    "trainer_bound": dict(
        triggers=("an asynchronous run's rollout group idles (`async/rollout_idle_ratio`, mean over the steady "
                  "iterations) 25% or more of each iteration, and more than the trainer waits"),
        impact="that idle share of the rollout group", reads="`async_iterations`"),
    "weight_sync_exposed": dict(
        triggers=("the trainer waits for the weight sync (`async/weight_sync_exposed_s` / `timing_s/iteration`, mean "
                  "over the steady iterations) 5% or more of each iteration"),
        impact="that share", reads="`async_iterations`"),
    "staleness_past_bound": dict(
        triggers="any trained sample's version gap exceeds the run's `async/max_staleness` (`async/over_bound_samples` > 0)",
        impact="those samples' share of the samples trained", reads="`async_iterations`"),
}

# rule id -> its findings' arguments (advisor.py registers one rule per entry, with DOCS[id])
CHECKS = {
    "rollout_bound": lambda summary: [f for f in bottleneck_findings(summary) if f[0] == "rollout_bound"],
    "trainer_bound": lambda summary: [f for f in bottleneck_findings(summary) if f[0] == "trainer_bound"],
    "weight_sync_exposed": sync_findings,
    "staleness_past_bound": staleness_findings,
}
