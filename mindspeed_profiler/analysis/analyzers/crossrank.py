"""Across captures: the stage x rank table and slow ranks.

Every row of the table is built from samples: a capture row from the per-step times of that rank's
captures of the stage (device busy per step when there is a device, else the step's wall time; a
capture without steps is one sample for the whole capture, under a `..._per_capture` metric), a
timeline row from the durations of that worker's spans of the stage, a cluster row from
msprof-analyze's own aggregate. `value_us` is the median of the samples, `spread_us` their robust
spread (1.4826 x the median absolute deviation), `n` how many there are.

The slow-rank rule (stated, and tested): within a group (same source, stage, role, metric) of at
least two rows, a row is flagged when
  - its ratio to the group's median value is above `threshold`, and
  - it has at least MIN_SAMPLES samples (a single slow call is noise, not a slow rank), and
  - it is above the group median by more than NOISE_FACTOR x the noise, the larger of its own
    spread and the group's median spread;
cluster rows are aggregates over the profiled steps already: the ratio alone decides. Capture rows
of a stage that the timeline also covers are never flagged: the timeline's medians, over every
iteration, win over a profiled call or two.
"""
from __future__ import annotations

import statistics

from mindspeed_profiler.analysis.models.rows import Field, RowModel, rank_number, worker_name

MIN_SAMPLES = 3
NOISE_FACTOR = 2.0
_MAD_TO_SIGMA = 1.4826


def spread(samples: list[float]) -> float:
    """1.4826 x the median absolute deviation (0 for fewer than two samples)."""
    if len(samples) < 2:
        return 0.0
    med = statistics.median(samples)
    return _MAD_TO_SIGMA * statistics.median(abs(x - med) for x in samples)


def capture_samples(c: dict) -> tuple[list[float], str]:
    """(samples, metric) of one capture: per step when it has steps, else one for the capture."""
    steps = c.get("steps") or []
    dev = c.get("device")
    if dev and dev.get("busy_us"):
        per_step = [s.get("device_busy_us") for s in steps]
        if steps and all(isinstance(v, (int, float)) for v in per_step):
            return [float(v) for v in per_step], "device_busy_us_per_step"
        if steps:
            return [dev["busy_us"] / len(steps)] * len(steps), "device_busy_us_per_step"
        return [float(dev["busy_us"])], "device_busy_us_per_capture"
    walls = [s.get("dur_us") for s in steps]
    if steps and all(isinstance(v, (int, float)) for v in walls):
        return [float(v) for v in walls], "wall_us_per_step"
    if c.get("wall_us"):
        return [float(c["wall_us"])], "wall_us_per_capture"
    return [], ""


def _row(source: str, stage, rank, role, metric: str, samples: list[float], path: str, n_captures: int | None = None,
         value: float | None = None) -> dict:
    row = STAGE_RANK.row(source=source, stage=stage, rank=rank, role=role, metric=metric,
                         value_us=statistics.median(samples) if value is None else value, n=len(samples),
                         spread_us=spread(samples), path=path)
    if n_captures is not None:
        row["n_captures"] = n_captures
    return row


def stage_rank_rows(captures: list[dict]) -> list[dict]:
    """One row per (source, stage, role, rank, metric): from captures, the timeline and cluster step traces."""
    rows = []
    per_rank: dict[tuple, list] = {}
    for c in captures:
        if c.get("status") != "ok":
            continue
        if c["kind"] in ("torch", "kineto", "ascend"):
            samples, metric = capture_samples(c)
            if samples and c.get("rank") is not None:
                per_rank.setdefault((c.get("stage") or "all", c.get("role"), c["rank"], metric), []).append((samples, c["path"]))
        elif c.get("timeline"):
            for r in c["timeline"]["stage_worker"]:
                rows.append(STAGE_RANK.row(source="timeline", stage=r["stage"], rank=r["worker"], role=r["role"],
                                           metric="median_span_us", value_us=r["median_us"], n=r["count"],
                                           spread_us=r.get("spread_us", 0.0), path=c["path"]))
        elif c["kind"] == "cluster":
            for r in c["ranks"]:
                rows.append(STAGE_RANK.row(source="cluster", stage="step", rank=r["rank"], role=None,
                                           metric="computing_us", value_us=r.get("computing_us", 0.0), n=None,
                                           spread_us=None, path=c["path"]))
    for (stage, role, rank, metric), caps in per_rank.items():
        samples = [x for s, _ in caps for x in s]
        path = caps[0][1] if len(caps) == 1 else f"{len(caps)} captures"
        rows.insert(0, _row("capture", stage, rank, role, metric, samples, path, n_captures=len(caps)))
    return rows


def _verdict(r: dict, med: float, group_spread: float, ratio: float, threshold: float, timeline_stages: set) -> tuple[bool, str]:
    if ratio <= threshold:
        return False, f"ratio {ratio:.2f} <= {threshold:g}"
    if r["source"] == "cluster":
        return True, f"ratio {ratio:.2f} > {threshold:g} (cluster aggregate)"
    if r["source"] == "capture" and (r.get("run_id"), r["stage"]) in timeline_stages:
        return False, "the timeline covers this stage: its medians decide"
    if (r.get("n") or 0) < MIN_SAMPLES:
        return False, f"only {r.get('n') or 0} sample(s): need {MIN_SAMPLES}"
    noise = max(r.get("spread_us") or 0.0, group_spread)
    if r["value_us"] - med <= NOISE_FACTOR * noise:
        return False, f"within noise ({r['value_us'] - med:.0f} us over the median, noise {noise:.0f} us)"
    return True, f"ratio {ratio:.2f} > {threshold:g} over {r['n']} samples, above noise ({noise:.0f} us)"


def slow_ranks(rows: list[dict], threshold: float = 1.2) -> list[dict]:
    """Ratio of each rank's value to the median of its group, and whether it is flagged by the rule
    in the module doc (`reason` says why or why not). Rows of different runs (`run_id`) are never
    compared. Sorted: flagged first, then by ratio."""
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r.get("run_id"), r["source"], r["stage"], r["role"], r["metric"]), []).append(r)
    timeline_stages = {(r.get("run_id"), r["stage"]) for r in rows if r["source"] == "timeline"}
    out = []
    for (run_id, source, stage, _role, metric), rs in groups.items():
        if len(rs) < 2:
            continue
        med = statistics.median(r["value_us"] for r in rs)
        group_spread = statistics.median((r.get("spread_us") or 0.0) for r in rs)
        for r in rs:
            ratio = r["value_us"] / med if med > 0 else 0.0
            flagged, reason = _verdict(r, med, group_spread, ratio, threshold, timeline_stages)
            row = SLOW_RANKS.row(source=source, stage=stage, metric=metric, rank=r["rank"], role=r["role"],
                                 value_us=r["value_us"], median_us=med, ratio=ratio, n=r.get("n"),
                                 flagged=flagged, reason=reason)
            if run_id is not None:
                row["run_id"] = run_id
            out.append(row)
    return sorted(out, key=lambda r: (not r["flagged"], -r["ratio"], str(r["rank"])))


# -- rows (rows.py): summary.json stage_rank[*] and slow_ranks[*]


def _with_worker(key: str):
    """select() of a summary table, each row with its worker name (the db's `worker`)."""
    return lambda summary: ((None, None, {**r, "worker": worker_name(r.get("role"), r.get("rank"))})
                            for r in summary.get(key) or [])


_RUN = Field("run_id", "text", "the run (only when the directory holds several)")
_SOURCE = Field("source", "text", "capture, timeline or cluster")
_STAGE = Field("stage", "text", "the stage (cluster: step)")
_ROLE = Field("role", "text", "the role")
_RANK = Field("rank", "rank", "the rank (summary.json and RunAnalysis: a timeline row's worker name; "
              "analysis.db: its number)", to_db=rank_number)
_WORKER = Field("worker", "text", "role:rank", computed=True)
_METRIC = Field("metric", "text", "what was sampled (device_busy_us_per_step, wall_us_per_step, "
                "..._per_capture, median_span_us, computing_us)")
_VALUE = Field("value_us", "us", "the median of the samples")
_N = Field("n", "count", "samples")

STAGE_RANK = RowModel(
    "stage_rank", "(source, stage, role, rank, metric)", "stage_rank[*]", table="stage_rank", method="cross_rank",
    per_capture=False, select=_with_worker("stage_rank"), fields=(
        _RUN, _SOURCE, _STAGE, _ROLE, _RANK, _WORKER, _METRIC, _VALUE,
        Field("spread_us", "us", "1.4826 x the samples' median absolute deviation"), _N,
        Field("n_captures", "count", "captures the samples came from (capture rows)"),
        Field("path", "text", "the capture (or how many)"),
    ))
SLOW_RANKS = RowModel(
    "slow_ranks", "row of stage_rank in a group of two or more", "slow_ranks[*]", table="slow_ranks",
    method="slow_ranks", per_capture=False, select=_with_worker("slow_ranks"), fields=(
        _RUN, _SOURCE, _STAGE, _METRIC, _ROLE, _RANK, _WORKER, _VALUE,
        Field("median_us", "us", "the group's median value"),
        Field("ratio", "ratio", "value / the group's median"), _N,
        Field("flagged", "flag", "slow by the rule (docs/analysis.md)"),
        Field("reason", "text", "why it is flagged or not"),
    ))
