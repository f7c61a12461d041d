"""The summary.json fields no question's row model declares, and what the renderers may read.

The terminal (console.py) and report.html (report/) read rows through the questions' models
(questions.MODELS), and also the summary's own record (counts, options, ...), the timeline's block,
its chart bars and a few keys of a capture that are no question's field (a timeline capture's
files, a cluster capture's ranks, ...). Those are declared here as row models without an
analysis.db table or a RunAnalysis method, so that every key a renderer reads is declared once:
`display.field(model, row, name)` reads through them, and tests/test_reads_declared_fields.py fails
when console or report reads a name that `declared_names()` does not hold.
"""
from __future__ import annotations

from typing import Iterator

from mindspeed_profiler.analysis.models.questions import MODELS
from mindspeed_profiler.analysis.models.rows import Field, Record, RowModel


def _the_summary(summary: dict) -> Iterator[Record]:
    yield None, None, summary


SUMMARY = RowModel(
    "summary", "analysis (the record summary.json is)", "summary.json's top level", select=_the_summary,
    per_capture=False, open_row=True, fields=(
        Field("schema", "count", "summary.json's schema version (formats.SUMMARY_SCHEMA)"),
        Field("tool", "text", "what wrote it"),
        Field("root", "text", "the analysed directory, absolute"),
        Field("created", "text", "when, UTC, ISO 8601"),
        Field("options_jobs", "count", "analyse -j", key=("options", "jobs")),
        Field("options_export_type", "text", "text or db (db: analysis.db written)", key=("options", "export_type")),
        Field("options_top", "count", "analyse --top: rows kept per capture list", key=("options", "top")),
        Field("options_threshold", "ratio", "analyse --threshold: a slow rank's ratio to its group's median",
              key=("options", "threshold")),
        Field("options_peak_tflops", "number", "analyse --peak-tflops, when given", key=("options", "peak_tflops")),
        Field("counts_found", "count", "captures found", key=("counts", "found")),
        Field("counts_ok", "count", "captures analysed", key=("counts", "ok")),
        Field("counts_failed", "count", "captures whose analysis failed", key=("counts", "failed")),
        Field("counts_unparsed", "count", "captures found but not parsed (raw Ascend data without torch_npu)",
              key=("counts", "unparsed")),
        Field("exit_code", "count", "analyse's exit code"),
        Field("elapsed_s", "s", "the analysis' time"),
    ),
    holds=("captures", "runs", "warnings", "stage_rank", "slow_ranks", "timeline", "findings"))


def _the_timeline(summary: dict) -> Iterator[Record]:
    tl = summary.get("timeline")
    if isinstance(tl, dict):
        yield None, None, tl


TIMELINE = RowModel(
    "timeline", "run with a timeline (the merged one the run's captures point to)", "timeline",
    select=_the_timeline, per_capture=False, open_row=True, fields=(
        Field("n_stage_spans", "count", "stage spans on the timeline"),
        Field("n_iterations", "count", "iterations on the timeline"),
        Field("t0_us", "us", "the timeline's origin"),
        Field("gantt_truncated", "flag", "the chart's bars (gantt) were capped"),
        Field("warning", "text", "why the timeline could not be used, when it could not"),
    ),
    # the iterations' rows (ITERATIONS), the stage_worker rows (STAGE_WORKER) and the chart's bars (GANTT)
    holds=("iterations", "stage_worker", "gantt"))


def _gantt(summary: dict) -> Iterator[Record]:
    for _, _, tl in _the_timeline(summary):
        for bar in tl.get("gantt") or []:
            yield None, None, bar


GANTT = RowModel(
    "gantt", "stage span drawn on report.html's timeline chart", "timeline.gantt[*]", select=_gantt,
    per_capture=False, fields=(
        Field("stage", "text", "the stage"), Field("worker", "text", "role:rank"),
        Field("iteration", "iteration", "the iteration it ran in"),
        Field("start_us", "us", "start, from the timeline's origin"), Field("dur_us", "us", "duration"),
    ))

CAPTURE_BLOCKS = RowModel(
    "capture blocks", "capture: what it holds besides the captures model's fields", "captures[*]",
    select=lambda summary: ((cid, c, c) for cid, c in enumerate(summary.get("captures") or [])),
    open_row=True, fields=(
        Field("files", "text", "a timeline capture's files, relative to it (the merged timeline first)"),
    ),
    # the capture's own warnings and missing files, the analysed timeline, a cluster capture's
    # rank rows, the capture's metadata (meta)
    holds=("warnings", "missing", "timeline", "ranks", "meta"))

# every model a renderer may read through: the questions' and these
READ_MODELS: tuple[RowModel, ...] = (*MODELS, SUMMARY, TIMELINE, GANTT, CAPTURE_BLOCKS)


def _places(model: RowModel) -> set[str]:
    """The summary keys a model's rows live under (each_capture(listed("steps")): steps)."""
    where = getattr(model.select, "where", None)
    return {k for k in (getattr(where, "key", None), getattr(where, "sub", None)) if isinstance(k, str)}


def declared_names(models: tuple[RowModel, ...] = READ_MODELS) -> frozenset[str]:
    """Every name a renderer may read: the models' fields, their older names, the keys of their
    paths in summary.json, the blocks they hold and the keys their rows live under."""
    out: set[str] = set()
    for m in models:
        for f in m.fields:
            out |= {f.name, f.code_name, *f.aliases, *(k for k in f.path if isinstance(k, str))}
        out |= set(m.holds) | set(m.legacy) | _places(m)
    return frozenset(out)
