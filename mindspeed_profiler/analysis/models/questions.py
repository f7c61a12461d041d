"""Every question's row model (rows.py), in analysis.db's table order, and the docs made from them.

Each model is declared beside its analyzer (analyzers/<question>.py); the few without one (the
captures themselves, the runs, the warnings, the trace events) are declared here.

    python -m mindspeed_profiler.analysis.models.questions    # docs/analysis.md's generated tables
"""
from __future__ import annotations

from typing import Iterator

from mindspeed_profiler.core import formats

from mindspeed_profiler.analysis.analyzers.annotations import ANNOTATIONS
from mindspeed_profiler.analysis.analyzers.async_rl import ASYNC_ITERATIONS
from mindspeed_profiler.analysis.analyzers.ascend_free import ASCEND_FREE
from mindspeed_profiler.analysis.analyzers.breakdown import BREAKDOWN, DEVICE_FIELDS
from mindspeed_profiler.analysis.analyzers.collective_bandwidth import COLLECTIVE_BANDWIDTH
from mindspeed_profiler.analysis.analyzers.communication import COLLECTIVES, COMMUNICATION
from mindspeed_profiler.analysis.analyzers.critical_path import CRITICAL_PATH
from mindspeed_profiler.analysis.analyzers.crossrank import SLOW_RANKS, STAGE_RANK
from mindspeed_profiler.analysis.analyzers.idle_causes import IDLE_CAUSES, KERNEL_LAUNCHES
from mindspeed_profiler.analysis.analyzers.kernels import KERNEL_TOTALS, KERNELS
from mindspeed_profiler.analysis.analyzers.long_tail import (
    ROLLOUT_BATCHES,
    ROLLOUT_LENGTHS,
    ROLLOUT_OCCUPANCY,
    ROLLOUT_SLOWEST,
)
from mindspeed_profiler.analysis.analyzers.links import LINKS
from mindspeed_profiler.analysis.analyzers.memory import MEMORY_PEAKS, MEMORY_SITES, NPU_MEMORY
from mindspeed_profiler.analysis.analyzers.memory_peaks import (
    MEMORY_RECORD_OPS,
    MEMORY_RECORD_PEAKS,
    MEMORY_STAGE_PEAKS,
)
from mindspeed_profiler.analysis.analyzers.oom import OOM_LIVE, OOM_RECORDS
from mindspeed_profiler.analysis.analyzers.ops import OP_TOTALS, OPS
from mindspeed_profiler.analysis.analyzers.stage_memory import STAGE_MEMORY
from mindspeed_profiler.analysis.analyzers.stages import ITERATIONS, SPANS, STAGE_WORKER, TIMELINE_IDLE, TIMELINE_STAGES
from mindspeed_profiler.analysis.analyzers.step_breakdown import STEP_BREAKDOWN
from mindspeed_profiler.analysis.analyzers.steps import STEPS
from mindspeed_profiler.analysis.analyzers.stragglers import STRAGGLER_COLLECTIVES, STRAGGLERS
from mindspeed_profiler.analysis.analyzers.tracker_metrics import TRACKER_METRICS
from mindspeed_profiler.analysis.models.rows import Field, Record, RowModel

_CAPTURE_DEVICE = ("busy_us", "compute_us", "communication_us", "communication_exposed_us", "memcpy_exposed_us", "idle_us")


def _captures(summary: dict) -> Iterator[Record]:
    for cid, c in enumerate(summary.get("captures") or []):
        sr = c.get("step_range") if isinstance(c.get("step_range"), list) and len(c["step_range"]) == 2 else [None, None]
        yield cid, c, {**c, "id": cid, "step_first": sr[0], "step_last": sr[1], "n_steps": len(c.get("steps") or []),
                       "n_warnings": len(c.get("warnings") or [])}


def _device(name: str) -> Field:
    f = next(f for f in DEVICE_FIELDS if f.name == name)
    return Field(name, f.unit, f"the capture's device.{name} (breakdown)", key=("device", name))


CAPTURES = RowModel(
    "captures", "capture (`id` is the `capture_id` of the other tables)", "captures[*]", table="captures",
    method="captures", per_capture=False, primary="id", open_row=True, select=_captures, fields=(
        Field("id", "id", "the capture's position in summary.json's captures", computed=True, code="capture_id"),
        Field("path", "text", "relative to DIR"), Field("kind", "text", "the input kind (torch, kineto, ascend, ...)"),
        Field("status", "text", "ok, failed or unparsed"), Field("error", "text", "why, when not ok"),
        Field("run_id", "text", "the run that wrote it (its metadata)"), Field("role", "text", "the worker's role"),
        Field("rank", "rank", "the worker's rank"), Field("stage", "text", "the stage (all: every stage)"),
        Field("step_first", "step", "step_range[0]: the first iteration it covers", computed=True),
        Field("step_last", "step", "step_range[1]: the last", computed=True),
        Field("start_us", "us", "absolute start, us since the epoch where the trace says so"),
        Field("wall_us", "us", "first event start to last event end"),
        *(_device(n) for n in _CAPTURE_DEVICE),
        Field("n_steps", "count", "len(steps)", computed=True),
        Field("n_events", "count", "events in the trace"),
        Field("n_bad_events", "count", "events without a usable time (left out)"),
        Field("n_warnings", "count", "len(warnings)", computed=True),
        Field("analyse_s", "s", "the capture's analysis time"),
        *(Field(f"export_session_{k}_s", "s", f"export_after_run: the held session's {what} at the run's end (its "
                f"metadata's export_phases.session_{k}; the same in every capture of one session)",
                key=("meta", "export_phases", f"session_{k}"), aliases=(f"session_{k}",))
          for k, what in (("stop", "stop (torch's)"), ("write", "JSON write (torch's)"), ("cut", "cut into captures"))),
    ))


def _runs(summary: dict) -> Iterator[Record]:
    for k, r in enumerate(summary.get("runs") or []):
        yield None, None, {"run_id": r, "position": k}


RUNS = RowModel("runs", "run id found", "runs[*]", table="runs", method="runs", per_capture=False,
                primary="run_id", conflict="IGNORE", select=_runs, fields=(
                    Field("run_id", "text", "the run id", computed=True),
                    Field("position", "count", "0 for the oldest", computed=True)))


def _warnings(summary: dict) -> Iterator[Record]:
    for w in summary.get("warnings") or []:
        yield None, None, {"path": None, "message": str(w)}
    for cid, c in enumerate(summary.get("captures") or []):
        for w in c.get("warnings") or []:
            yield cid, c, {"path": c.get("path"), "message": str(w)}
        if c.get("error"):
            yield cid, c, {"path": c.get("path"), "message": f"{c.get('status')}: {c['error']}"}


WARNINGS = RowModel(
    "warnings", "warning (capture_id NULL for the summary's own `warnings`)", "warnings[*], captures[*].warnings[*]",
    table="warnings", method="warnings", select=_warnings, fields=(
        Field("path", "text", "the capture (null for the summary's own)", computed=True),
        Field("message", "text", "the warning (a failed capture's error too: status: error)", computed=True)))

EVENTS = RowModel(
    "events", "complete event of each trace", "analysis.db only (the traces' events)", table="events", select=None,
    fields=(Field("name", "text", "the event"), Field("cat", "text", "its category"),
            Field("pid", "text", "process"), Field("tid", "text", "thread"),
            Field("ts_us", "us", "absolute start"), Field("dur_us", "us", "duration")))

FINDINGS = RowModel(
    "findings", "finding of the advisor (advisor.py), ranked by impact", "findings[*]", table="findings",
    method="findings", per_capture=False, select=lambda summary: ((None, None, f) for f in summary.get("findings") or []),
    fields=(
        Field("id", "text", "the rule's id (its row in docs/diagnosis.md, \"The advisor\")"),
        Field("title", "text", "who and where, in one line"),
        Field("impact", "ratio", "the share of the time at stake (0..1), by which findings are ranked"),
        Field("action", "text", "what to try"),
        Field("docs", "text", "where the numbers are explained"),
    ))

# analysis.db's tables, in order (the first twenty as they always were, then the ones added with the models)
MODELS: tuple[RowModel, ...] = (
    RUNS, CAPTURES, WARNINGS, COMMUNICATION, COLLECTIVES, EVENTS, OPS, KERNELS, OP_TOTALS, KERNEL_TOTALS,
    ANNOTATIONS, STEPS, STEP_BREAKDOWN, STAGE_RANK, SLOW_RANKS, SPANS, TIMELINE_STAGES, ITERATIONS, TIMELINE_IDLE,
    STAGE_WORKER, BREAKDOWN, CRITICAL_PATH, MEMORY_PEAKS, MEMORY_SITES, NPU_MEMORY,
    IDLE_CAUSES, KERNEL_LAUNCHES, LINKS, STRAGGLERS, STRAGGLER_COLLECTIVES, MEMORY_RECORD_PEAKS, MEMORY_RECORD_OPS,
    FINDINGS, TRACKER_METRICS, MEMORY_STAGE_PEAKS, ASCEND_FREE, COLLECTIVE_BANDWIDTH,
    ROLLOUT_BATCHES, ROLLOUT_OCCUPANCY, ROLLOUT_LENGTHS, ROLLOUT_SLOWEST,
    ASYNC_ITERATIONS, STAGE_MEMORY, OOM_RECORDS, OOM_LIVE,
)
BY_TABLE = {m.table: m for m in MODELS}


# -- docs/analysis.md (tests/test_analysis_rows.py checks the page holds exactly this)

def _summary_key(f: Field) -> str:
    return "(computed)" if f.computed else ".".join(str(k) for k in f.path)


def _field_name(f: Field) -> str:
    """Its name, and its name in code where that differs (Field.code)."""
    return f"{f.name} (in code: {f.code})" if f.code else f.name


def db_tables_markdown() -> str:
    """The table of analysis.db's tables (one row per table)."""
    lines = ["| table | one row per | columns |", "|---|---|---|"]
    lines += [f"| `{m.table}` | {m.per} | {', '.join(m.columns)} |" for m in MODELS]
    return "\n".join(lines)


def fields_markdown(m: RowModel) -> str:
    """One question's field table, with where its rows are in each output."""
    where = [f"summary.json `{m.where}`" if not m.where.startswith(("analysis.db", formats.CAPTURE_TOTALS_FILE)) else m.where,
             f"analysis.db `{m.table}`" + (" (and `capture_id`)" if m.per_capture else "")]
    if m.method:
        where.append(f"RunAnalysis `.{m.method}()`" + (" (path, role, rank, stage first)" if m.per_capture else ""))
    lines = [f"#### {m.question}", "", f"One row per {m.per}. " + "; ".join(where) + ".", "",
             "| field | unit | summary.json | meaning | also called |", "|---|---|---|---|---|"]
    lines += [f"| {_field_name(f)} | {f.unit} | {_summary_key(f)} | {f.doc} | {', '.join(f.aliases)} |" for f in m.fields]
    if m.legacy:
        lines += ["", "RunAnalysis rows also keep " + ", ".join(f"`{k}`" for k in m.legacy)
                  + " as summary.json has it (nested)."]
    return "\n".join(lines)


def markdown() -> str:
    return "\n\n".join(fields_markdown(m) for m in MODELS)


if __name__ == "__main__":
    print(db_tables_markdown())
    print()
    print(markdown())
