"""Per-stage memory per worker (issue 47): the metrics tracker's stage-call lines
(`metrics/memory/<role>_rank<R>.stages.jsonl`, metrics/memory_tracking.py) as one row per (worker,
stage): its calls and iterations, the largest device allocated / reserved peak, the largest and the
median host (resident) peak, the bytes offloaded / onloaded, the device's capacity. The table
across ranks is the union of the workers' rows (STAGE_MEMORY); the advisor compares the ranks of a
stage (analyzers/memory_rules.py). Pure."""
from __future__ import annotations

from mindspeed_profiler.analysis.analyzers.grouping import median
from mindspeed_profiler.analysis.parsing.numbers import json_int
from mindspeed_profiler.analysis.models.rows import Field, RowModel, each_capture, inside

PEAK_FIELDS = ("device_allocated_peak", "device_reserved_peak", "host_peak")


def stage_rows(role: str, rank: int, calls: list[dict], capacity: int | None, host_limit: int | None,
               host_scope: str | None) -> list[dict]:
    """One worker's STAGE_MEMORY rows from its stage-call lines (dicts as written), in the order the
    stages first ran."""
    groups: dict[str, list[dict]] = {}
    for c in calls:
        groups.setdefault(str(c.get("stage")), []).append(c)
    out = []
    for stage, group in groups.items():
        peaks = {k: [v for c in group if (v := json_int(c.get(k))) is not None and v >= 0] for k in PEAK_FIELDS}
        iterations = {c.get("iteration") for c in group if isinstance(c.get("iteration"), int)}
        out.append(STAGE_MEMORY.row(
            role=role, rank=rank, stage=stage, calls=len(group), iterations=len(iterations),
            device_allocated_peak_bytes=max(peaks["device_allocated_peak"], default=None),
            device_reserved_peak_bytes=max(peaks["device_reserved_peak"], default=None),
            host_peak_bytes=max(peaks["host_peak"], default=None),
            host_peak_median_bytes=int(median(peaks["host_peak"])) if peaks["host_peak"] else None,
            offload_bytes=sum(max(0, json_int(c.get("offload_bytes")) or 0) for c in group),
            onload_bytes=sum(max(0, json_int(c.get("onload_bytes")) or 0) for c in group),
            failed_calls=sum(1 for c in group if c.get("failed")),
            capacity_bytes=capacity, host_limit_bytes=host_limit, host_peak_scope=host_scope))
    return out


STAGE_MEMORY = RowModel(
    "stage_memory", "(worker, stage) of the metrics tracker's per-stage memory (metrics/memory/*.stages.jsonl)",
    "captures[*].stage_memory.stages[*] (kind memory)", table="stage_memory", method="stage_memory",
    select=each_capture(inside("stage_memory", "stages")), fields=(
        Field("role", "text", "the worker's role"),
        Field("rank", "rank", "the worker's rank"),
        Field("stage", "text", "the stage"),
        Field("calls", "count", "stage calls measured"),
        Field("iterations", "count", "iterations with a call of it"),
        Field("device_allocated_peak_bytes", "bytes", "the largest peak of allocated device memory over its calls "
              "(the allocator's peak, reset at each call's entry); null on a CPU"),
        Field("device_reserved_peak_bytes", "bytes", "the same for reserved memory (what the caching allocator holds)"),
        Field("host_peak_bytes", "bytes", "the largest resident (host) peak of the process over its calls (VmHWM, "
              "reset at each call's entry)"),
        Field("host_peak_median_bytes", "bytes", "the median of its calls' host peaks"),
        Field("offload_bytes", "bytes", "moved device -> host in its calls (offload())"),
        Field("onload_bytes", "bytes", "moved host -> device in its calls (onload())"),
        Field("failed_calls", "count", "calls that ended with an exception"),
        Field("capacity_bytes", "bytes", "the device's memory, when known"),
        Field("host_limit_bytes", "bytes", "the host memory the process may use (its cgroup's limit, else the machine's)"),
        Field("host_peak_scope", "text", "`stage`: host peaks per call; `process`: since the process began (VmHWM "
              "could not be reset)"),
    ))
