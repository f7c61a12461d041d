"""Asynchronous RL's metrics, one definition set (docs/async.md): per trainer iteration, who waited
for whom, the weight sync in its phases and the staleness of the samples trained on. Pure.

    async_row(...)      -> the `async/*` keys of one iteration's tracker row
    busy_seconds(...)   the union of spans inside a window (a group's busy time)
    ALIASES             our key -> the names verl, NeMo-RL and AReaL give the same (or the nearest) quantity

The trainer writes the row to `<profile_save_path>/metrics/driver_rank0.jsonl` (with `iteration`
and `timing_s/iteration`, so that the analysis reads it as a tracker file); the analysis's async
rules (analysis/analyzers/async_rules.py) read these keys.
"""
from __future__ import annotations

from typing import Iterable, Mapping

from mindspeed_profiler.core import formats

PREFIX, SYNC_PHASES = formats.ASYNC_METRICS_PREFIX, formats.WEIGHT_SYNC_PHASES

# ours -> (framework, its key) for the same or the nearest quantity; docs/async.md "Other frameworks' names"
# says where each was read and how its definition differs (a ratio there where we give seconds, ...)
ALIASES: dict[str, tuple[tuple[str, str], ...]] = {
    "async/trainer_wait_s": (("NeMo-RL", "timing/train/idle/buffer_starvation"),
                             ("NeMo-RL", "timing/train/exposed_generation")),
    "async/trainer_idle_ratio": (("verl", "fully_async/trainer/idle_ratio"),),
    "async/rollout_idle_ratio": (("verl", "fully_async/rollouter/idle_ratio"),
                                 ("NeMo-RL", "timing/train/idle/generation_limit_pause")),
    "async/weight_sync_s": (("verl", "timing_s/param_sync"), ("NeMo-RL", "timing/train/weight_sync")),
    "async/weight_sync_exposed_s": (("NeMo-RL", "timing/train/idle/refit_bubble"),),
    "async/staleness_mean": (("NeMo-RL", "train/avg_trajectory_age"), ("AReaL", "version_stats/sample_staleness_avg")),
    "async/staleness_max": (("AReaL", "version_stats/sample_staleness_max"),),
    "async/staleness_min": (("AReaL", "version_stats/sample_staleness_min"),),
    "async/stale_samples": (("verl", "fully_async/count/stale_samples_processed"),),
}


def busy_seconds(spans: Iterable[tuple[float, float]], window: tuple[float, float]) -> float:
    """Seconds of `window` covered by at least one of `spans` ((start, end), any unit; overlaps counted once)."""
    lo, hi = window
    cut = sorted((max(a, lo), min(b, hi)) for a, b in spans if min(b, hi) > max(a, lo))
    total, cur_a, cur_b = 0.0, None, None
    for a, b in cut:
        if cur_b is None or a > cur_b:
            if cur_b is not None:
                total += cur_b - cur_a
            cur_a, cur_b = a, b
        else:
            cur_b = max(cur_b, b)
    if cur_b is not None:
        total += cur_b - cur_a
    return total


def staleness(trained_version: int, sample_versions: Iterable[int]) -> list[int]:
    """Each sample's version gap: the version of the policy trained on it minus the version that generated it."""
    return [trained_version - v for v in sample_versions]


def async_row(window: tuple[float, float], trainer_wait_s: float, rollout_spans: Iterable[tuple[float, float]],
              sync_s: Mapping[str, float], sync_exposed_s: float, trained_version: int,
              sample_versions: Iterable[int], max_staleness: int) -> dict[str, float]:
    """One trainer iteration's `async/*` keys (docs/async.md "Definitions").

    `window`: the trainer iteration's (start, end) in seconds; `trainer_wait_s`: the time in it the
    trainer waited for its batch; `rollout_spans`: the rollout group's busy spans (generation,
    weight transfer and load); `sync_s`: the seconds of each phase of the weight sync after this
    update (SYNC_PHASES); `sync_exposed_s`: the part of it the trainer waited for;
    `trained_version`: the policy version the update trained (updates before it);
    `sample_versions`: the version that generated each sample of its batch."""
    wall = window[1] - window[0]
    busy = busy_seconds(rollout_spans, window)
    gaps = staleness(trained_version, sample_versions)
    row: dict[str, float] = {
        "async/trainer_wait_s": trainer_wait_s,
        "async/trainer_idle_ratio": trainer_wait_s / wall if wall > 0 else 0.0,
        "async/rollout_busy_s": busy,
        "async/rollout_idle_ratio": 1.0 - busy / wall if wall > 0 else 0.0,
    }
    for phase in SYNC_PHASES:
        row[f"async/weight_sync_{phase}_s"] = float(sync_s.get(phase, 0.0))
    row["async/weight_sync_s"] = sum(row[f"async/weight_sync_{p}_s"] for p in SYNC_PHASES)
    row["async/weight_sync_exposed_s"] = sync_exposed_s
    row["async/policy_version"] = trained_version
    row["async/max_staleness"] = max_staleness
    if gaps:
        row["async/samples"] = len(gaps)
        row["async/stale_samples"] = sum(1 for g in gaps if g > 0)
        row["async/staleness_mean"] = sum(gaps) / len(gaps)
        row["async/staleness_min"] = min(gaps)
        row["async/staleness_max"] = max(gaps)
        row["async/over_bound_samples"] = sum(1 for g in gaps if g > max_staleness)
        for g in sorted(set(gaps)):   # the distribution, not only the mean
            row[f"async/staleness_count/{g}"] = gaps.count(g)
    return row
