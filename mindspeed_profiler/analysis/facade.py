"""`RunAnalysis`: one run's analysis for notebooks and scripts, one method per question.

    from mindspeed_profiler import RunAnalysis
    ra = RunAnalysis("./profiler_data")      # its analysis/summary.json (+ capture_totals.jsonl), or analysed now (nothing written)
    ra.breakdown()                           # plain rows: a list of dicts
    ra.top_ops().to_pandas()                 # a DataFrame, where pandas is installed
    ra.compare(RunAnalysis("./baseline"))["ops"]

Every method returns `Rows` (a list of dicts with `.to_pandas()`), one per question: the fields of
its row model (questions.py; docs/analysis.md lists them), which are the columns of its analysis.db
table; rows that come from a capture carry its identity first: path, role, rank, stage.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from . import questions as q
from .analyzers import compare as _compare
from .batch import analyse_directory
from .outputs import find_summary, load_summary, located
from .rows import RowModel


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

    # -- per capture ---------------------------------------------------------------------------
    def captures(self) -> Rows:
        """Every capture found: kind, status (ok / failed / unparsed), the reason, steps, wall time,
        its device totals (as the analysis.db `captures` table)."""
        return self.rows(q.CAPTURES)

    def breakdown(self) -> Rows:
        """Where each capture's device time went: busy = compute + exposed communication + exposed
        memory copy, window = busy + idle (docs/analysis.md)."""
        return self.rows(q.BREAKDOWN)

    def communication(self) -> Rows:
        """Communication per capture with any: on the device (total, exposed = not hidden under
        compute, overlapped, the exposed share of the busy time), on the host (collective calls'
        time and share of the wall) and the Ascend collectives' waiting share. The device fields
        were called communication_us, exposed_us, overlapped_us, exposed_share_of_busy: each row
        has those names too."""
        return self.rows(q.COMMUNICATION)

    def collectives(self) -> Rows:
        """The top collectives of each capture: name, location (device / host; also `where`), calls, time."""
        return self.rows(q.COLLECTIVES)

    def steps(self) -> Rows:
        """Every captured step: its duration and the device time busy inside it."""
        return self.rows(q.STEPS)

    def step_breakdown(self) -> Rows:
        """msprof-analyze's per-step breakdown (computing, communication not overlapped, overlapped,
        free, bubble, preparing, ...) of each Ascend capture, with `source` (the file it came from)
        and `device_id`; and the rank rows of msprof-analyze's own cluster files (source "cluster")."""
        return self.rows(q.STEP_BREAKDOWN)

    def top_ops(self) -> Rows:
        """Host ops by self time (count, total, self and launched device time), per capture."""
        return self.rows(q.OPS)

    def op_totals(self) -> Rows:
        """Every host op name of each capture (not only the top ones)."""
        return self.rows(q.OP_TOTALS)

    def kernels(self) -> Rows:
        """Device kernels by total time, with their class (compute / communication / memcpy), per capture."""
        return self.rows(q.KERNELS)

    def kernel_totals(self) -> Rows:
        """Every kernel name of each capture (not only the top ones)."""
        return self.rows(q.KERNEL_TOTALS)

    def annotations(self) -> Rows:
        """mstx / record_function ranges by total time, per capture."""
        return self.rows(q.ANNOTATIONS)

    def memory_peaks(self) -> Rows:
        """Per device of a capture's PyTorch memory snapshot: the peak of allocated bytes."""
        return self.rows(q.MEMORY_PEAKS)

    def memory_sites(self) -> Rows:
        """The allocation sites holding the most memory at each device's peak."""
        return self.rows(q.MEMORY_SITES)

    def npu_memory(self) -> Rows:
        """Ascend memory records per component: peaks of allocated, reserved and active bytes."""
        return self.rows(q.NPU_MEMORY)

    def idle_causes(self) -> Rows:
        """Per device stream of a Kineto capture: idle time by cause (host wait, kernel wait, other),
        as HolisticTraceAnalysis defines it (docs/diagnosis.md)."""
        return self.rows(q.IDLE_CAUSES)

    def kernel_launches(self) -> Rows:
        """Per Kineto capture: kernel launch delays and CPU vs device durations (HTA's launch stats)."""
        return self.rows(q.KERNEL_LAUNCHES)

    def links(self) -> Rows:
        """Ascend communication matrix across the ranks: per step, group, op and src-dst link, the
        transport, MB, ms and GB/s as msprof-analyze's cluster_communication_matrix, and `slow`
        (below half the median of its transport's links; docs/diagnosis.md, "Links")."""
        return self.rows(q.LINKS)

    def findings(self) -> Rows:
        """The advisor's findings, largest impact first: id, title, impact, action, docs (and in
        summary.json the evidence); docs/diagnosis.md, "The advisor"."""
        return self.rows(q.FINDINGS)

    def stragglers(self) -> Rows:
        """Per rank of a multi-rank job (Kineto captures of one run, role and stage): HTA's potential
        stragglers (metric, verdict) beside who arrived last at the matched collectives and what it
        cost the others (docs/diagnosis.md, "Stragglers")."""
        return self.rows(q.STRAGGLERS)

    def straggler_collectives(self) -> Rows:
        """Each collective matched on two ranks or more: the rank that arrived last and the waits."""
        return self.rows(q.STRAGGLER_COLLECTIVES)

    def ascend_free(self) -> Rows:
        """Per Ascend capture (db export), the longest free intervals of the device and why: PyTorch
        dispatched nothing, a slow / late CANN launch, or other device tasks (msprof-analyze's
        free_analysis; docs/diagnosis.md, "On Ascend: free time by cause")."""
        return self.rows(q.ASCEND_FREE)

    def collective_bandwidth(self) -> Rows:
        """Per capture, collective, dtype, group and message size: algorithm and bus bandwidth from
        Kineto's collective args (nccl-tests' factors), latency-bound small messages flagged
        (docs/diagnosis.md, "Collective bandwidth")."""
        return self.rows(q.COLLECTIVE_BANDWIDTH)

    def memory_record_peaks(self) -> Rows:
        """Per device (Ascend: and component): peak allocated / reserved bytes from the raw memory
        records (Kineto [memory] events, memory_record.csv / MEMORY_RECORD; docs/diagnosis.md, "Memory")."""
        return self.rows(q.MEMORY_RECORD_PEAKS)

    def memory_stage_peaks(self) -> Rows:
        """Per device and annotated range name (the stages our profiler draws, record_function /
        mstx ranges): the peak allocated / reserved bytes inside them (Kineto [memory] events)."""
        return self.rows(q.MEMORY_STAGE_PEAKS)

    def memory_record_ops(self) -> Rows:
        """The ops allocating most, per device (Kineto [memory] events, operator_memory.csv / OP_MEMORY)."""
        return self.rows(q.MEMORY_RECORD_OPS)

    def tracker_metrics(self) -> Rows:
        """The metrics tracker's rows (metrics/<role>_rank<R>.jsonl): per worker, iteration and key
        (timing_s/<stage>, perf/throughput, perf/mfu/<stage>, ...; docs/metrics.md)."""
        return self.rows(q.TRACKER_METRICS)

    def warnings(self) -> Rows:
        """Every warning: the summary's own (capture identity empty) and each capture's, errors too."""
        return self.rows(q.WARNINGS)

    def runs(self) -> Rows:
        """The run ids found, oldest first."""
        return self.rows(q.RUNS)

    # -- across ranks --------------------------------------------------------------------------
    def cross_rank(self) -> Rows:
        """The stage x rank table (from captures, the timeline and cluster step traces)."""
        return self.rows(q.STAGE_RANK)

    def slow_ranks(self, flagged_only: bool = False) -> Rows:
        """Each rank's ratio to the median of its group; `flagged` above the threshold."""
        return Rows(r for r in self.rows(q.SLOW_RANKS) if r["flagged"] or not flagged_only)

    # -- the RL timeline -----------------------------------------------------------------------
    def iterations(self) -> Rows:
        """One row per iteration: duration, time with stages overlapping, with no stage running, the
        profiler's own time, the critical path as text."""
        return self.rows(q.ITERATIONS)

    def stages(self) -> Rows:
        """One row per iteration and stage: wall (union of its spans), summed span time, calls."""
        return self.rows(q.TIMELINE_STAGES)

    def idle(self) -> Rows:
        """One row per iteration and worker: the time the worker ran no stage."""
        return self.rows(q.TIMELINE_IDLE)

    def stage_worker(self) -> Rows:
        """One row per stage and worker over the whole timeline: calls, total, mean, median, spread."""
        return self.rows(q.STAGE_WORKER)

    def critical_path(self) -> Rows:
        """The chain of stage spans bounding each iteration, in order (docs/analysis.md: a heuristic)."""
        return self.rows(q.CRITICAL_PATH)

    # -- two runs ------------------------------------------------------------------------------
    def compare(self, other: "RunAnalysis") -> dict[str, Rows]:
        """B - A per stage, rank and op (self = A, other = B), sorted by impact."""
        res = _compare.compare(self.summary, other.summary)
        return {k: Rows(v) if isinstance(v, list) else v for k, v in res.items()}
