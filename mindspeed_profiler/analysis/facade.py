"""`RunAnalysis`: one run's analysis for notebooks and scripts, one method per question.

    from mindspeed_profiler import RunAnalysis
    ra = RunAnalysis("./profiler_data")      # its analysis/summary.json, or analysed now (nothing written)
    ra.breakdown()                           # plain rows: a list of dicts
    ra.top_ops().to_pandas()                 # a DataFrame, where pandas is installed
    ra.compare(RunAnalysis("./baseline"))["ops"]

Every method returns `Rows` (a list of dicts with `.to_pandas()`); rows that come from a capture
carry its identity first: path, role, rank, stage.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

from .analyzers import compare as _compare
from .batch import analyse_directory
from .outputs import find_summary, load_summary

_IDENTITY = ("path", "role", "rank", "stage")


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
    def from_summary(cls, summary: dict) -> "RunAnalysis":
        """Wrap an already loaded summary.json dict."""
        self = cls.__new__(cls)
        self.path = Path(summary.get("root") or ".")
        self.summary = summary
        return self

    # -- per capture ---------------------------------------------------------------------------
    def _ok(self) -> Iterable[dict]:
        return (c for c in self.summary.get("captures", []) if c.get("status") == "ok")

    @staticmethod
    def _who(c: dict) -> dict:
        return {k: c.get(k) for k in _IDENTITY}

    def _per_capture(self, key: str) -> Rows:
        return Rows({**self._who(c), **row} for c in self._ok() for row in c.get(key) or [])

    def captures(self) -> Rows:
        """Every capture found: kind, status (ok / failed / unparsed), the reason, steps, wall time."""
        return Rows({**self._who(c), "kind": c.get("kind"), "status": c.get("status"), "error": c.get("error"),
                     "n_steps": len(c.get("steps") or []), "wall_us": c.get("wall_us")}
                    for c in self.summary.get("captures", []))

    def breakdown(self) -> Rows:
        """Where each capture's device time went: busy = compute + exposed communication + exposed
        memory copy, window = busy + idle (docs/analysis.md)."""
        return Rows({**self._who(c), **c["device"]} for c in self._ok() if c.get("device"))

    def communication(self) -> Rows:
        """Communication per capture: total, exposed (not hidden under compute), overlapped, and
        the exposed share of the device's busy time."""
        return Rows({**self._who(c), "communication_us": d["communication_us"],
                     "exposed_us": d["communication_exposed_us"], "overlapped_us": d["communication_overlapped_us"],
                     "exposed_share_of_busy": d["communication_exposed_us"] / d["busy_us"] if d["busy_us"] else None}
                    for c in self._ok() for d in [c.get("device")] if d)

    def steps(self) -> Rows:
        """Every captured step: its duration and the device time busy inside it."""
        return self._per_capture("steps")

    def step_breakdown(self) -> Rows:
        """msprof-analyze's per-step breakdown (computing, communication not overlapped, overlapped,
        free, bubble, preparing, ...) of each Ascend capture, with `source` (the file it came from)
        and `device_id`; and the rank rows of msprof-analyze's own cluster files (source "cluster")."""
        rows = [{**self._who(c), "device_id": c.get("device_id"), "source": c.get("step_trace_source"), **r}
                for c in self._ok() for r in c.get("step_trace") or []]
        rows += [{**self._who(c), "device_id": None, "source": "cluster", **r}
                 for c in self._ok() if c.get("kind") == "cluster" for r in c.get("ranks") or []]
        return Rows(rows)

    def top_ops(self) -> Rows:
        """Host ops by self time (count, total, self and launched device time), per capture."""
        return self._per_capture("top_ops")

    def kernels(self) -> Rows:
        """Device kernels by total time, with their class (compute / communication / memcpy), per capture."""
        return self._per_capture("top_kernels")

    def annotations(self) -> Rows:
        """mstx / record_function ranges by total time, per capture."""
        return self._per_capture("annotations")

    # -- across ranks --------------------------------------------------------------------------
    def cross_rank(self) -> Rows:
        """The stage x rank table (from captures, the timeline and cluster step traces)."""
        return Rows(dict(r) for r in self.summary.get("stage_rank") or [])

    def slow_ranks(self, flagged_only: bool = False) -> Rows:
        """Each rank's ratio to the median of its group; `flagged` above the threshold."""
        return Rows(dict(r) for r in self.summary.get("slow_ranks") or [] if r.get("flagged") or not flagged_only)

    # -- the RL timeline -----------------------------------------------------------------------
    def _iterations(self) -> list[dict]:
        return (self.summary.get("timeline") or {}).get("iterations") or []

    def iterations(self) -> Rows:
        """One row per iteration: duration, time with stages overlapping, time with no stage running."""
        keep = ("iteration", "start_us", "dur_us", "stage_covered_us", "overlap_us", "no_stage_us")
        return Rows({k: it.get(k) for k in keep} for it in self._iterations())

    def stages(self) -> Rows:
        """One row per iteration and stage: wall (union of its spans), summed span time, calls."""
        return Rows({"iteration": it["iteration"], "stage": name, **v}
                    for it in self._iterations() for name, v in it["stages"].items())

    def critical_path(self) -> Rows:
        """The chain of stage spans bounding each iteration, in order (docs/analysis.md: a heuristic)."""
        return Rows({"iteration": it["iteration"], "position": k, **p}
                    for it in self._iterations() for k, p in enumerate(it["critical_path"]))

    # -- two runs ------------------------------------------------------------------------------
    def compare(self, other: "RunAnalysis") -> dict[str, Rows]:
        """B - A per stage, rank and op (self = A, other = B), sorted by impact."""
        res = _compare.compare(self.summary, other.summary)
        return {k: Rows(v) if isinstance(v, list) else v for k, v in res.items()}
