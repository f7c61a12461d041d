"""What the terminal (console.py) and report.html (report/sections.py) both say about rows: the same
rows (from the questions' row models), named and selected by the same rules. How numbers are
written (the terminal's ms have 2 decimals, the report's 3) and the escaping (rich markup, HTML)
stay with each renderer."""
from __future__ import annotations

import math
from typing import Any, Iterator, NamedTuple

from mindspeed_profiler.core.formats import is_train_stage

from mindspeed_profiler.analysis.analyzers.critical_path import path_text
from mindspeed_profiler.analysis.analyzers.tracker_metrics import MFU_PREFIX
from mindspeed_profiler.analysis.models.questions import COMMUNICATION, SLOW_RANKS, STEP_BREAKDOWN, TRACKER_METRICS
from mindspeed_profiler.analysis.models.rows import Field, RowModel, UnknownField, int64

# the step_breakdown fields both renderers show, in their column order
BREAKDOWN_CELLS = ("computing_us", "communication_exposed_us", "overlapped_us", "free_us", "bubble_us", "preparing_us",
                   "stage_us")

__all__ = ["BREAKDOWN_CELLS", "field", "capture_rows", "path_text", "short", "pct", "slow_ranks", "capture_worker", "capture_label", "comm_shares", "by_text",
           "step_breakdown", "communication", "IterationMetric", "TrackerIterations", "tracker_iterations"]


_BY_NAME: dict[int, tuple[RowModel, dict[str, Field]]] = {}   # id(model) -> its fields by name and older name


def field(model: RowModel, raw: Any, name: str) -> Any:
    """The value of `model`'s field `name` (or its name in code, or an older name) in a raw summary row: the
    field's path followed (None where it is missing). A name the model does not declare raises
    UnknownField: the renderers read rows through their models, never by a key of their own."""
    got = _BY_NAME.get(id(model))
    if got is None or got[0] is not model:
        got = _BY_NAME[id(model)] = (model, {n: f for f in model.fields for n in (f.name, f.code_name, *f.aliases)})
    f = got[1].get(name)
    if f is None:
        raise UnknownField(f"row model {model.question!r}: {name!r} is not a field of it; declared: "
                           f"{', '.join(sorted(got[1]))}")
    return f.get(raw)


def capture_rows(model: RowModel, capture: dict) -> list[dict]:
    """One capture's rows of a per-capture question (its steps, top ops, device block, ...), each as
    {field: value} of the model's fields (where select() is each_capture(...): the place the model
    says its rows live)."""
    where = getattr(model.select, "where", None)
    if where is None:
        raise TypeError(f"row model {model.question!r}: its rows are not a capture's own block or list")
    return [{f.name: f.get(raw) for f in model.fields} for raw in where(capture) or ()]


def short(text, n: int) -> str:
    """At most n characters, cutting the middle (both the start and the end of a name tell something)."""
    text = "" if text is None else str(text)
    return text if len(text) <= n else text[: n // 2 - 1] + "…" + text[-(n - n // 2):]


def pct(x) -> str:
    return "" if x is None else f"{100 * x:.1f}%"


def slow_ranks(summary: dict) -> list[dict]:
    """summary.json's slow_ranks rows as the slow_ranks row model gives them (its fields: `worker`
    is "role:rank", the timeline's worker name; None without a rank)."""
    return [row for _, _, _, row in SLOW_RANKS.records(summary)]


def capture_worker(c: dict) -> str:
    """A capture's worker in a table cell: "role rank", or what there is of it."""
    return " ".join(str(x) for x in (c.get("role"), c.get("rank")) if x is not None and x != "")


def capture_label(c: dict) -> str:
    """A capture's name: its role, rank and stage, or its path."""
    label = " ".join(str(x) for x in (c.get("role"), f"rank {c['rank']}" if c.get("rank") is not None else None,
                                      c.get("stage")) if x)
    return label or c["path"]


def comm_shares(c: dict) -> tuple[float | None, float | None]:
    """(exposed communication / the device's busy time, host collective calls / the wall time)."""
    comm = c.get("communication") or {}
    return (comm.get("device") or {}).get("share_of_busy"), (comm.get("host") or {}).get("share_of_wall")


def by_text(captures: list[dict], key: str) -> dict[str, list[str]]:
    """Each distinct text of the captures' `key` list (warnings, missing) -> the paths that have it."""
    out: dict[str, list[str]] = {}
    for c in captures:
        for w in c.get(key) or []:
            out.setdefault(str(w), []).append(c["path"])
    return out


def step_breakdown(summary: dict) -> Iterator[tuple[int, dict, dict]]:
    """(capture index, capture, step_breakdown row) of the ok captures, in summary order: an Ascend
    capture's steps, a cluster capture's rank rows (source "cluster")."""
    for cid, c, _, row in STEP_BREAKDOWN.records(summary):
        if c.get("status") == "ok":
            yield cid, c, row


def communication(summary: dict) -> Iterator[tuple[dict, dict, list[dict]]]:
    """(capture, communication row, its top collectives) of the ok captures with any."""
    for _, c, raw, row in COMMUNICATION.records(summary):
        if c.get("status") == "ok":
            yield c, row, raw.get("top") or []


# -- the metrics tracker's numbers per iteration (docs/metrics.md), as both iteration tables show them

THROUGHPUT = "perf/throughput"
WALL = "timing_s/iteration"


class IterationMetric(NamedTuple):
    """One column of the iteration tables: `kind` "tokens/s" or "MFU", the role (tokens/s) or stage
    (MFU) it is of, and {iteration: mean over the workers that wrote it}."""
    kind: str
    name: str | None
    header: str
    values: dict[int, float]

    def text(self, v: float | None) -> str:
        if v is None:
            return ""
        if self.kind != "tokens/s":
            return f"{100 * v:.3g}%"
        return f"{v:,.1f}" if abs(v) < 1e12 else f"{v:.3g}"   # a damaged file's 1e300 is not 300 digits wide


class TrackerIterations(NamedTuple):
    columns: list[IterationMetric]
    wall_us: dict[int, float]   # iteration -> the slowest worker's timing_s/iteration, in us


def tracker_iterations(summary: dict) -> TrackerIterations:
    """The tracker's tokens/s and MFU per iteration; no column where the tracker has none.

    tokens/s: perf/throughput (a rank's tokens over its iteration time), the mean over a role's
    ranks, one column per role: per device, as verl's perf/throughput (a sum would count a batch
    twice on tensor-parallel ranks given the same tokens). MFU: perf/mfu/<stage>, the mean over the
    ranks, one column per training stage (update / train: the MFU the advisor judges), else per
    stage."""
    acc: dict[tuple[str, str | None], dict[int, list[float]]] = {}
    wall: dict[int, float] = {}
    for r in TRACKER_METRICS.rows(summary):
        m, it, v = r.get("metric"), int64(r.get("iteration")), r.get("value")
        if it is None or isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            continue   # a summary.json edited by hand: the tracker's reader wrote only finite numbers
        if m == WALL:
            wall[it] = max(wall.get(it, 0.0), v * 1e6)
            continue
        key = ("tokens/s", r.get("role")) if m == THROUGHPUT else \
            ("MFU", m[len(MFU_PREFIX):]) if isinstance(m, str) and m.startswith(MFU_PREFIX) else None
        if key is not None:
            acc.setdefault(key, {}).setdefault(it, []).append(v)
    mfu = sorted((k for k in acc if k[0] == "MFU"), key=lambda k: str(k[1]))
    roles = sorted((k for k in acc if k[0] == "tokens/s"), key=lambda k: str(k[1]))
    cols = []
    for kind, name in roles + ([k for k in mfu if is_train_stage(str(k[1]))] or mfu):
        header = f"MFU {name}" if kind == "MFU" else f"{name} tokens/s/rank" if len(roles) > 1 else "tokens/s/rank"
        cols.append(IterationMetric(kind, name, header, {it: sum(v) / len(v) for it, v in acc[(kind, name)].items()}))
    return TrackerIterations(cols, wall)
