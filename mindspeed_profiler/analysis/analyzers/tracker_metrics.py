"""The tracker's per-iteration metrics as analysis rows (TRACKER_METRICS: one per iteration and
metric), and the per-worker means the advisor compares (MFU of the update, the reserved memory
peak against the device's capacity). The keys are docs/metrics.md's."""
from __future__ import annotations

from pathlib import Path

from mindspeed_profiler.core.formats import flops_per_token
from mindspeed_profiler.core.jsonsafe import loads_lenient

from ..parsing.numbers import finite_number
from mindspeed_profiler.analysis.models.rows import Field, RowModel, each_capture, inside

MAX_ROWS = 100_000        # iterations read from one file (a run of that many iterations is rare; said when cut)
MFU_PREFIX = "perf/mfu/"
TIMING_PREFIX = "timing_s/"


def metric_row(iteration: int, metric: str, value: float) -> dict:
    """One TRACKER_METRICS row."""
    return TRACKER_METRICS.row(iteration=iteration, metric=metric, value=value)


def read_tracker_file(path: Path) -> dict:
    """I/O: a tracker file -> {"tracker": {"rows": [{iteration, metric, value}], "n_iterations"},
    "warnings"}. A line that is no row is counted and left out, not fatal. An iteration written
    twice (a run resumed after a crash ran it again) keeps its last line, said in a warning."""
    by_iteration: dict[int, list[dict]] = {}
    again: set[int] = set()
    n_bad, n_iter, cut = 0, 0, False
    with open(path, "r", encoding="utf-8", errors="replace") as fh:
        for line in fh:
            if not line.strip():
                continue
            if n_iter >= MAX_ROWS:
                cut = True
                break
            try:
                row = loads_lenient(line)   # a lone surrogate escape in a key becomes text, not a crash of the outputs
            except (ValueError, RecursionError):   # not JSON, or nested past the parser's depth
                n_bad += 1
                continue
            it = row.get("iteration") if isinstance(row, dict) else None
            if isinstance(it, bool) or not isinstance(it, int):
                n_bad += 1
                continue
            n_iter += 1
            if it in by_iteration:
                again.add(it)
            by_iteration[it] = [metric_row(it, str(k), x) for k, v in row.items()
                                if k != "iteration" and (x := finite_number(v)) is not None]
    if not n_iter:
        raise ValueError(f"no iteration rows in the tracker file ({n_bad} unreadable line(s))")
    warnings = [f"{n_bad} line(s) that are no iteration row (JSON object with an integer iteration) left out"] if n_bad else []
    if again:
        shown = sorted(again)
        warnings.append(f"iteration(s) {', '.join(map(str, shown[:8]))}{' ...' if len(shown) > 8 else ''} recorded by "
                        "more than one attempt (the run resumed and ran them again): each keeps its last line")
    if cut:
        warnings.append(f"more than {MAX_ROWS} iterations: the first {MAX_ROWS} are read")
    rows = [r for its_rows in by_iteration.values() for r in its_rows]
    return {"tracker": {"rows": rows, "n_iterations": len(by_iteration)}, "warnings": warnings}


def with_peak(rows: list[dict], peak_tflops: float) -> tuple[list[dict], int]:
    """The rows with every iteration's perf/mfu/<stage> recomputed for another device peak (analyse
    --peak-tflops): perf/tokens x F x perf/model_parameters / (timing_s/<stage> x peak x 1e12), F = 6
    for a training stage, else 2 (the tracker's formula), and perf/peak_tflops set to the peak. An
    iteration without tokens or parameters keeps what it had (no MFU can be made for it): their
    number is returned beside the rows."""
    by_it: dict[int, dict[str, float]] = {}
    for r in rows:
        by_it.setdefault(r["iteration"], {})[r["metric"]] = r["value"]
    out = [r for r in rows if not (r["metric"].startswith(MFU_PREFIX) or r["metric"] == "perf/peak_tflops")
           or not _can_recompute(by_it[r["iteration"]])]
    for it, m in sorted(by_it.items()):
        if not _can_recompute(m):
            continue
        for key, seconds in m.items():
            stage = key[len(TIMING_PREFIX):] if key.startswith(TIMING_PREFIX) and key != "timing_s/iteration" else None
            if stage and seconds > 0:
                flops = m["perf/tokens"] * flops_per_token(stage, int(m["perf/model_parameters"]))
                out.append(metric_row(it, MFU_PREFIX + stage, flops / (seconds * peak_tflops * 1e12)))
        out.append(metric_row(it, "perf/peak_tflops", float(peak_tflops)))
    return out, sum(1 for m in by_it.values() if not _can_recompute(m))


def _can_recompute(m: dict[str, float]) -> bool:
    return m.get("perf/tokens") is not None and bool(m.get("perf/model_parameters"))


def means(rows: list[dict]) -> dict[str, float]:
    """metric -> its mean over the iterations (iterations without it do not count)."""
    acc: dict[str, list[float]] = {}
    for r in rows:
        acc.setdefault(r["metric"], []).append(r["value"])
    return {k: sum(v) / len(v) for k, v in acc.items()}


def maxima(rows: list[dict]) -> dict[str, float]:
    out: dict[str, float] = {}
    for r in rows:
        out[r["metric"]] = max(out.get(r["metric"], r["value"]), r["value"])
    return out


TRACKER_METRICS = RowModel(
    "tracker_metrics", "(worker, iteration, metric) of the metrics tracker's files",
    "captures[*].tracker.rows[*] (kind tracker: metrics/<role>_rank<R>.jsonl)", table="tracker_metrics",
    method="tracker_metrics", select=each_capture(inside("tracker", "rows")), fields=(
        Field("iteration", "iteration", "the row's iteration"),
        Field("metric", "text", "the key (timing_s/<stage>, perf/throughput, perf/mfu/<stage>, ...: docs/metrics.md)"),
        Field("value", "number", "its value, in the key's unit"),
    ))
