"""`RunAnalysis`: one run's analysis for notebooks and scripts, one method per question.

    from mindspeed_profiler import RunAnalysis
    ra = RunAnalysis("./profiler_data")      # its analysis/summary.json (+ capture_totals.jsonl), or analysed now (nothing written)
    ra.breakdown()                           # plain rows: a list of dicts
    ra.top_ops().to_pandas()                 # a DataFrame, where pandas is installed
    ra.compare(RunAnalysis("./baseline"))["ops"]

Every method returns `Rows` (a list of dicts with `.to_pandas()`), one per question: the fields of
its row model (questions.py; docs/analysis.md lists them), which are the columns of its analysis.db
table; rows that come from a capture carry its identity first: path, role, rank, stage.

The question methods are made from the models, in one place (the end of this module): every model
of questions.MODELS with a `method` name gets `RunAnalysis.<method>()` returning `self.rows(model)`,
its docstring from METHOD_DOCS (a model without one there: a docstring made from the model). A new
question's method is its `method=` on the model (and, for a better help(), a line in METHOD_DOCS);
tests/test_facade_methods.py checks each model's method and docstring.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterable

from mindspeed_profiler.analysis.models import questions as q
from mindspeed_profiler.analysis.analyzers import compare as _compare
from mindspeed_profiler.analysis.pipeline.batch import analyse_directory
from mindspeed_profiler.analysis.results.outputs import find_summary, load_summary, located
from mindspeed_profiler.analysis.models.rows import RowModel


class Rows(list):
    """A list of dicts (one per row) that turns into a pandas DataFrame on request."""

    def to_pandas(self) -> Any:
        try:
            import pandas as pd
        except ImportError:
            raise ImportError("Rows.to_pandas() needs pandas (pip install pandas); the rows are plain dicts") from None
        return pd.DataFrame(list(self))


class RunAnalysis:
    """The analysis of one profile_save_path (or any directory / trace `analyse` takes)."""

    def __init__(self, path: str | Path, *, reanalyse: bool = False, jobs: int = 1, top: int = 20):
        self.path = Path(path)
        found = None if reanalyse else find_summary(self.path)
        if found is not None:
            self.summary = load_summary(found)
        else:
            self.summary, _ = analyse_directory(self.path, jobs=jobs, top_n=top, progress=False, write=False)

    @classmethod
    def from_summary(cls, summary: dict, where: str | Path | None = None) -> "RunAnalysis":
        """Wrap an already loaded summary.json dict; `where`: the directory it was read from, where its
        captures' totals file (capture_totals.jsonl) is (a summary from outputs.load_summary knows it)."""
        self = cls.__new__(cls)
        self.path = Path(summary.get("root") or ".")
        self.summary = located(summary, where) if where is not None else summary
        return self

    def rows(self, model: RowModel) -> Rows:
        """Any question's rows by its model (questions.MODELS): what analysis.db's table holds, with
        the capture's identity first on per-capture rows and each field's older names too."""
        return Rows(model.rows(self.summary))

    # one method per question with a `method` name (RunAnalysis.captures(), .breakdown(), ...):
    # made from the models below the class (add_question_methods); these take arguments of their own
    def slow_ranks(self, flagged_only: bool = False) -> Rows:
        """Each rank's ratio to the median of its group; `flagged` above the threshold."""
        return Rows(r for r in self.rows(q.SLOW_RANKS) if r["flagged"] or not flagged_only)

    def compare(self, other: "RunAnalysis") -> dict[str, Rows]:
        """B - A per stage, rank and op (self = A, other = B), sorted by impact."""
        res = _compare.compare(self.summary, other.summary)
        return {k: Rows(v) if isinstance(v, list) else v for k, v in res.items()}


# help(RunAnalysis.<method>): what each question's rows say, by method name
METHOD_DOCS: dict[str, str] = {
    "captures": ("Every capture found: kind, status (ok / failed / unparsed), the reason, steps, wall time, its "
        "device totals (as the analysis.db `captures` table)."),
    "breakdown": ("Where each capture's device time went: busy = compute + exposed communication + exposed memory "
        "copy, window = busy + idle (docs/analysis.md)."),
    "communication": ("Communication per capture with any: on the device (total, exposed = not hidden under compute, "
        "overlapped, the exposed share of the busy time), on the host (collective calls' time and share "
        "of the wall) and the Ascend collectives' waiting share. The device fields were called "
        "communication_us, exposed_us, overlapped_us, exposed_share_of_busy: each row has those names "
        "too."),
    "collectives": "The top collectives of each capture: name, location (device / host; also `where`), calls, time.",
    "steps": "Every captured step: its duration and the device time busy inside it.",
    "step_breakdown": ("msprof-analyze's per-step breakdown (computing, communication not overlapped, overlapped, free, "
        "bubble, preparing, ...) of each Ascend capture, with `source` (the file it came from) and "
        "`device_id`; and the rank rows of msprof-analyze's own cluster files (source \"cluster\")."),
    "top_ops": "Host ops by self time (count, total, self and launched device time), per capture.",
    "op_totals": "Every host op name of each capture (not only the top ones).",
    "kernels": "Device kernels by total time, with their class (compute / communication / memcpy), per capture.",
    "kernel_totals": "Every kernel name of each capture (not only the top ones).",
    "annotations": "mstx / record_function ranges by total time, per capture.",
    "memory_peaks": "Per device of a capture's PyTorch memory snapshot: the peak of allocated bytes.",
    "memory_sites": "The allocation sites holding the most memory at each device's peak.",
    "npu_memory": "Ascend memory records per component: peaks of allocated, reserved and active bytes.",
    "idle_causes": ("Per device stream of a Kineto capture: idle time by cause (host wait, kernel wait, other), as "
        "HolisticTraceAnalysis defines it (docs/diagnosis.md)."),
    "kernel_launches": "Per Kineto capture: kernel launch delays and CPU vs device durations (HTA's launch stats).",
    "links": ("Ascend communication matrix across the ranks: per step, group, op and src-dst link, the "
        "transport, MB, ms and GB/s as msprof-analyze's cluster_communication_matrix, and `slow` (below "
        "half the median of its transport's links; docs/diagnosis.md, \"Links\")."),
    "findings": ("The advisor's findings, largest impact first: id, title, impact, action, docs (and in "
        "summary.json the evidence); docs/diagnosis.md, \"The advisor\"."),
    "stragglers": ("Per rank of a multi-rank job (Kineto captures of one run, role and stage): HTA's potential "
        "stragglers (metric, verdict) beside who arrived last at the matched collectives and what it cost"
        " the others (docs/diagnosis.md, \"Stragglers\")."),
    "straggler_collectives": "Each collective matched on two ranks or more: the rank that arrived last and the waits.",
    "ascend_free": ("Per Ascend capture (db export), the longest free intervals of the device and why: PyTorch "
        "dispatched nothing, a slow / late CANN launch, or other device tasks (msprof-analyze's "
        "free_analysis; docs/diagnosis.md, \"On Ascend: free time by cause\")."),
    "collective_bandwidth": ("Per capture, collective, dtype, group and message size: algorithm and bus bandwidth from "
        "Kineto's collective args (nccl-tests' factors), latency-bound small messages flagged "
        "(docs/diagnosis.md, \"Collective bandwidth\")."),
    "memory_record_peaks": ("Per device (Ascend: and component): peak allocated / reserved bytes from the raw memory records "
        "(Kineto [memory] events, memory_record.csv / MEMORY_RECORD; docs/diagnosis.md, \"Memory\")."),
    "memory_stage_peaks": ("Per device and annotated range name (the stages our profiler draws, record_function / mstx "
        "ranges): the peak allocated / reserved bytes inside them (Kineto [memory] events)."),
    "memory_record_ops": "The ops allocating most, per device (Kineto [memory] events, operator_memory.csv / OP_MEMORY).",
    "tracker_metrics": ("The metrics tracker's rows (metrics/<role>_rank<R>.jsonl): per worker, iteration and key "
        "(timing_s/<stage>, perf/throughput, perf/mfu/<stage>, ...; docs/metrics.md)."),
    "warnings": "Every warning: the summary's own (capture identity empty) and each capture's, errors too.",
    "runs": "The run ids found, oldest first.",
    "cross_rank": "The stage x rank table (from captures, the timeline and cluster step traces).",
    "iterations": ("One row per iteration: duration, time with stages overlapping, with no stage running, the "
        "profiler's own time, the critical path as text."),
    "stages": "One row per iteration and stage: wall (union of its spans), summed span time, calls.",
    "idle": "One row per iteration and worker: the time the worker ran no stage.",
    "stage_worker": "One row per stage and worker over the whole timeline: calls, total, mean, median, spread.",
    "critical_path": "The chain of stage spans bounding each iteration, in order (docs/analysis.md: a heuristic).",
    "rollout_batches": ("The long tail of the rollout, one row per run, iteration and stage (the per-sample records of "
        "samples/<role>_rank<R>.jsonl): t50 / t90 / t100, mean occupancy, the capacity lost to the tail, "
        "response lengths, truncation, the engine's queue / prefill / decode (docs/rollout.md, \"The long "
        "tail: definitions\")."),
    "rollout_occupancy": "Each batch's occupancy curve: samples running / the batch over time (at most 200 points).",
    "rollout_lengths": "Each batch's response-length histogram: bins of equal width, samples and truncated ones.",
    "rollout_slowest": "The slowest samples of each batch (--top): worker, id, latency, start, first token, length.",
}


def _question_method(model: RowModel) -> Callable[[RunAnalysis], Rows]:
    def method(self: RunAnalysis) -> Rows:
        return self.rows(model)
    method.__name__, method.__qualname__ = str(model.method), f"RunAnalysis.{model.method}"
    method.__module__ = __name__
    method.__doc__ = METHOD_DOCS.get(str(model.method)) or (
        f"The {model.question} rows: one per {model.per} (docs/questions.md, \"{model.question}\").")
    return method


def add_question_methods(cls: type, models: Iterable[RowModel] = q.MODELS) -> None:
    """A method `cls.<model.method>()` for each model with a `method` name that `cls` does not define
    itself or inherits (slow_ranks takes an argument of its own)."""
    for model in models:
        if model.method and not hasattr(cls, model.method):
            setattr(cls, model.method, _question_method(model))


add_question_methods(RunAnalysis)
