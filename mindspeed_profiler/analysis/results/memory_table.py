"""The memory tables (issue 47, docs/memory.md), their rows and headers, for the terminal
(results/console.py) and report.html (results/report/sections.py): the per-stage x rank peaks
(STAGE_MEMORY) and the out-of-memory / host watermark records (OOM_RECORDS). No rich here (the
process writing report.html never imports it)."""
from __future__ import annotations

from mindspeed_profiler.analysis.analyzers.oom import OOM_RECORDS
from mindspeed_profiler.analysis.analyzers.stage_memory import STAGE_MEMORY

GIB = 2**30
MAX_ROWS = 200   # stage x rank rows shown (analysis.db's stage_memory has all)
STAGES_TITLE = "Memory per stage and rank (peaks over the stage's calls, GiB; docs/memory.md)"
STAGE_HEADERS = ("worker", "stage", "calls", "device allocated", "device reserved", "device capacity", "host resident",
                 "host median", "offloaded", "onloaded", "failed")
RECORDS_TITLE = "Out-of-memory and host watermark records (docs/memory.md)"
RECORD_HEADERS = ("worker", "kind", "stage", "iteration", "asked GiB", "free GiB", "host GiB", "held most (site)",
                  "held most (stage)", "snapshot")


def _gib(v) -> str:
    return "" if not isinstance(v, (int, float)) else f"{v / GIB:.2f}"


def stage_rows(summary: dict) -> list[list[str]]:
    """One row per (worker, stage), by stage then rank (pure, for the tables and their test)."""
    rows = sorted(STAGE_MEMORY.rows(summary), key=lambda r: (str(r.get("stage")), str(r.get("role")),
                                                             r.get("rank") if isinstance(r.get("rank"), int) else -1))
    return [[f"{r.get('role')}:{r.get('rank')}", str(r.get("stage")), str(r.get("calls")),
             _gib(r.get("device_allocated_peak_bytes")), _gib(r.get("device_reserved_peak_bytes")),
             _gib(r.get("capacity_bytes")), _gib(r.get("host_peak_bytes")), _gib(r.get("host_peak_median_bytes")),
             _gib(r.get("offload_bytes") or None), _gib(r.get("onload_bytes") or None), str(r.get("failed_calls") or "")]
            for r in rows[:MAX_ROWS]]


def record_rows(summary: dict) -> list[list[str]]:
    rows = sorted(OOM_RECORDS.rows(summary), key=lambda r: r.get("time_ns") or 0)
    return [[f"{r.get('role')}:{r.get('rank')}", str(r.get("kind")), str(r.get("stage")), str(r.get("iteration")),
             _gib(r.get("tried_bytes")), _gib(r.get("device_free_bytes")), _gib(r.get("host_rss_bytes")),
             str(r.get("top_site") or ""), str(r.get("top_stage") or ""), str(r.get("snapshot") or "")]
            for r in rows[:MAX_ROWS]]
