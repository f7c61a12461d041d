"""Per-step device time as msprof-analyze and torch_npu's `step_trace_time.csv` define it
(torch_npu `_trace_step_time_db_parser`, msprof's Overlap Analysis lanes), all in microseconds:

- a step's device window runs from the first device task launched inside the host step
  (`ProfilerStep#N`) to the later of the last such task's end and the host step's end; a task
  belongs to the window its *start* falls in (whole, never cut);
- computing = time covered by compute tasks; communication = time covered by the collective ops
  (`hcom_*`); communication not overlapped = communication minus the part under computing;
  overlapped = communication - not overlapped;
- e2e = first to last compute or communication in the window; free = e2e minus the time covered by
  computing or communication; bubble = time covered by `hcom_receive*` ops (pipeline waits);
  stage = e2e - bubble; not overlapped and exclude receive = not overlapped - bubble;
  preparing = first compute or communication task - the host step's start.

Three ways to the same rows: from the device tasks, from torch_npu's own Overlap Analysis lanes
(trace_view.json, or the db's OVERLAP_ANALYSIS), or read from step_trace_time.csv / analysis.db
(parsing/ascend_files.py). One addition of ours, `memcpy_exposed_us`: the part of free that
memory copies (PCIE / SDMA copy tasks) cover, where the tasks are known (msprof counts copies
as free; `device.idle_us` does not).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mindspeed_profiler.analysis.analyzers import intervals
from ..parsing.ascend_files import step_label
from ..parsing.ascend_tasks import LANE_PROCESS, LANES
from mindspeed_profiler.analysis.models.rows import Field, RowModel, each_capture
from .breakdown import BREAKDOWN
from .classify import ClassifiedTrace

BREAKDOWN_FIELDS = ("computing_us", "communication_exposed_us", "overlapped_us", "communication_us", "free_us",
                    "stage_us", "bubble_us", "communication_exposed_exclude_receive_us", "preparing_us")
RECEIVE_PREFIX = "hcom_receive"


@dataclass(frozen=True)
class StepWindow:
    """One step on the device: [start, end) in the trace's relative microseconds."""

    step: int | str | None
    start: float
    end: float
    host_start: float | None = None


def device_windows(ct: ClassifiedTrace) -> list[StepWindow]:
    """The step windows of a trace (see the module doc). Each device activity is placed by its
    launch (the runtime call with the same correlation / connection id) into the host step that
    contains it, a host step running until the next one starts (the task queue may launch a step's
    last tasks after its ProfilerStep ended); without a launch, by its own start. Without host
    steps: one window over all device activity, step None."""
    ev, m = ct.ev, ct.m
    dev = np.flatnonzero(m["device"])
    si = np.flatnonzero(ct.is_step)
    si = si[np.argsort(ct.ts[si], kind="stable")]
    if not len(si):
        if not len(dev):
            return []
        return [StepWindow(None, float(ct.ts[dev].min()), float(ct.end[dev].max()))]
    hs, he = ct.ts[si], ct.end[si]
    launch = ct.ts[dev].copy()
    rt = np.flatnonzero(m["runtime"] & (ev.corr >= 0))
    if len(rt) and len(dev):
        order = np.argsort(ev.corr[rt], kind="stable")
        rc, rts = ev.corr[rt][order], ct.ts[rt][order]
        pos = np.clip(np.searchsorted(rc, ev.corr[dev]), 0, len(rc) - 1)
        hit = (rc[pos] == ev.corr[dev]) & (ev.corr[dev] >= 0)
        launch[hit] = rts[pos[hit]]
    k = np.searchsorted(hs, launch, side="right") - 1   # the last host step started at or before the launch
    out = []
    for j, i in enumerate(si):
        mine = dev[k == j]
        start = float(ct.ts[mine].min()) if len(mine) else float(hs[j])
        end = max(float(ct.end[mine].max()), float(he[j])) if len(mine) else float(he[j])
        out.append(StepWindow(int(ct.step_num[ev.name[i]]), start, end, float(hs[j])))
    return out


def _u(s: np.ndarray, e: np.ndarray) -> float:
    return intervals.union_length(s, e)


def breakdown_row(step, comp: tuple, comm: tuple, recv: tuple, copy: tuple | None, host_start: float | None) -> dict:
    """One step's row from the intervals that belong to it ((starts, ends) pairs)."""
    cs, ce = comp
    ks, ke = comm
    computing, communication = _u(cs, ce), _u(ks, ke)
    both = _u(np.r_[cs, ks], np.r_[ce, ke])
    exposed = both - computing
    bubble = _u(*recv)
    if len(cs) or len(ks):
        lo, hi = float(np.min(np.r_[cs, ks])), float(np.max(np.r_[ce, ke]))
        e2e = hi - lo
    else:
        lo = hi = None
        e2e = 0.0
    row = STEP_BREAKDOWN.row(
        step=step_label(step), computing_us=computing, communication_exposed_us=exposed,
        overlapped_us=communication - exposed, communication_us=communication, free_us=e2e - both,
        stage_us=e2e - bubble, bubble_us=bubble, communication_exposed_exclude_receive_us=exposed - bubble,
        preparing_us=(lo - host_start) if lo is not None and host_start is not None else None)
    if copy is not None:
        row["memcpy_exposed_us"] = _exposed_copies(copy, lo, hi, np.r_[cs, ks], np.r_[ce, ke]) if lo is not None else 0.0
    return finish_row(row)


def _exposed_copies(copy: tuple, lo: float, hi: float, bs: np.ndarray, be: np.ndarray) -> float:
    """Time inside [lo, hi] covered by copies and by nothing else (a part of free)."""
    s, e = intervals.clip(copy[0], copy[1], lo, hi)
    if not len(s):
        return 0.0
    return _u(np.r_[s, bs], np.r_[e, be]) - _u(bs, be)


def finish_row(row: dict) -> dict:
    """dur_us (the step's device time: its Stage, else computing + exposed communication + free)
    and device_busy_us (computing + exposed communication + exposed copies)."""
    stage = row.get("stage_us")
    row["dur_us"] = stage if stage is not None and stage == stage and stage > 0 else \
        sum(row.get(k) or 0.0 for k in ("computing_us", "communication_exposed_us", "free_us"))
    row["device_busy_us"] = sum(row.get(k) or 0.0 for k in ("computing_us", "communication_exposed_us", "memcpy_exposed_us"))
    return row


def _in(ts: np.ndarray, w: StepWindow) -> np.ndarray:
    return (ts >= w.start) & (ts < w.end)


def from_tasks(ct: ClassifiedTrace, windows: list[StepWindow]) -> list[dict]:
    """Rows computed from the device tasks: compute, communication (collective ops) and copies."""
    m, ts, end = ct.m, ct.ts, ct.end
    recv_name = ct.ev.lookup(ct.ev.names, lambda n: str(n).startswith(RECEIVE_PREFIX))[ct.ev.name] if len(ct.ev) else m["comm"]
    rows = []
    for w in windows:
        inw = _in(ts, w)
        pick = lambda mask: (ts[mask & inw], end[mask & inw])
        rows.append(breakdown_row(w.step, pick(m["compute"]), pick(m["comm"]), pick(m["comm"] & recv_name),
                                  pick(m["memcpy"]), w.host_start))
    return rows


def has_lanes(ct: ClassifiedTrace) -> bool:
    return bool(_lane_mask(ct).any())


def _lane_mask(ct: ClassifiedTrace) -> np.ndarray:
    ev = ct.ev
    if not len(ev):
        return np.zeros(0, bool)
    pname = [str(ev.process_names.get(p, "")) for p in ev.pids]
    return ev.lookup(pname, lambda n: n.startswith(LANE_PROCESS))[ev.pid]


def from_lanes(ct: ClassifiedTrace, windows: list[StepWindow]) -> list[dict]:
    """Rows summed from torch_npu's Overlap Analysis lanes (what step_trace_time.csv is made of):
    each lane's durations per window, bubble from the hcom_receive ops."""
    ev, ts, dur = ct.ev, ct.ts, ct.dur
    lane = _lane_mask(ct)
    lane_of = {name: lane & ev.lookup(ev.names, lambda n, x=name: n == x)[ev.name] for name in LANES}
    recv = ct.m["comm"] & ev.lookup(ev.names, lambda n: str(n).startswith(RECEIVE_PREFIX))[ev.name]
    rows = []
    for w in windows:
        inw = _in(ts, w)
        tot = {name: float(dur[mask & inw].sum()) for name, mask in lane_of.items()}
        span = (lane | recv) & inw
        e2e = float(ct.end[span].max() - ts[span].min()) if span.any() else 0.0
        first = (lane_of["Computing"] | lane_of["Communication"]) & inw
        bubble = float(dur[recv & inw].sum())
        exposed = tot["Communication(Not Overlapped)"]
        rows.append(finish_row({
            "step": step_label(w.step), "computing_us": tot["Computing"], "communication_exposed_us": exposed,
            "overlapped_us": tot["Communication"] - exposed, "communication_us": tot["Communication"],
            "free_us": tot["Free"], "stage_us": e2e - bubble, "bubble_us": bubble,
            "communication_exposed_exclude_receive_us": exposed - bubble,
            "preparing_us": (float(ts[first].min()) - w.host_start) if first.any() and w.host_start is not None else None}))
    return rows


def exposed_copies_by_step(ct: ClassifiedTrace, windows: list[StepWindow]) -> dict:
    """{step: memcpy_exposed_us} from the tasks (for rows read from a file or the lanes)."""
    return {r["step"]: r.get("memcpy_exposed_us") for r in from_tasks(ct, windows)}


def from_kernel_rows(step_ids: list, ts: np.ndarray, dur: np.ndarray, is_comm: np.ndarray) -> list[dict]:
    """Rows from kernel_details.csv alone (compute rows, the HCCL rows as communication, by Step
    Id; a step's window is its rows' extent; rows without a Step Id are outside the steps; no
    Step Id at all: one row, step None; no host step, so no preparing)."""
    ids = np.array([step_label(s) for s in step_ids], dtype=object)
    labels = sorted({s for s in ids if s is not None}, key=lambda s: (not isinstance(s, int), s if isinstance(s, int) else 0, str(s)))
    end = ts + dur
    out = []
    for sid in labels or [None]:
        m = ids == sid if labels else np.ones(len(ts), bool)
        pick = lambda mask: (ts[m & mask], end[m & mask])
        out.append(breakdown_row(sid, pick(~is_comm), pick(is_comm), pick(np.zeros(len(ts), bool)), None, None))
    return out


def device_totals(rows: list[dict], n_activities: int | None = None) -> dict | None:
    """The capture's `device` block from its step rows (sums over the steps): window = the steps'
    e2e time, busy = computing + exposed communication + exposed copies, idle = free - exposed copies."""
    if not rows:
        return None
    s = lambda k: float(sum(r.get(k) or 0.0 for r in rows))
    copies = s("memcpy_exposed_us")
    window = s("computing_us") + s("communication_exposed_us") + s("free_us")
    busy = s("computing_us") + s("communication_exposed_us") + copies
    return BREAKDOWN.row(window_us=window, busy_us=busy, compute_us=s("computing_us"), communication_us=s("communication_us"),
                         communication_exposed_us=s("communication_exposed_us"),
                         communication_overlapped_us=s("overlapped_us"), memcpy_exposed_us=copies, idle_us=window - busy,
                         n_activities=n_activities)


# -- rows (rows.py): summary.json captures[*].step_trace[*] and a cluster capture's ranks[*]

_MSPROF = (   # msprof-analyze's columns, in BREAKDOWN_FIELDS' order
    ("computing", "time covered by compute tasks"),
    ("not overlapped", "communication minus the part under computing"),
    ("overlapped", "communication - not overlapped"),
    ("communication", "time covered by the collective ops"),
    ("free", "the step's span minus the time covered by computing or communication"),
    ("stage", "the step's span - bubble"),
    ("bubble", "time covered by hcom_receive* ops (pipeline waits)"),
    ("not overlapped and exclude receive", "not overlapped - bubble"),
    ("preparing", "first compute or communication task - the host step's start"),
)


def _breakdown_rows(c: dict) -> list[dict]:
    rows = [{**r, "rank": c.get("rank"), "source": c.get("step_trace_source"),
             "device_id": r["device_id"] if r.get("device_id") is not None else c.get("device_id")}
            for r in c.get("step_trace") or []]
    if c.get("kind") == "cluster":
        rows += [{**r, "source": "cluster"} for r in c.get("ranks") or []]
    return rows


STEP_BREAKDOWN = RowModel(
    "step_breakdown", "step of an Ascend capture's step_trace, or rank row of msprof-analyze's cluster files",
    "captures[*].step_trace[*], cluster captures[*].ranks[*]", table="step_breakdown", method="step_breakdown",
    select=each_capture(_breakdown_rows), fields=(
        Field("rank", "rank", "the capture's rank (cluster: the row's)", computed=True),
        Field("device_id", "id", "the device (step_trace_time.csv's Device_id, else the capture's)", computed=True),
        Field("step", "step", "the step (INTEGER; a label that is not a number stays text)"),
        *(Field(k, "us", f"msprof-analyze's {col}: {doc}") for k, (col, doc) in zip(BREAKDOWN_FIELDS, _MSPROF)),
        Field("memcpy_exposed_us", "us", "ours: the part of free covered by memory copies only (null where the "
              "tasks are not known)"),
        Field("dur_us", "us", "the step's device time: stage, else computing + not overlapped + free"),
        Field("device_busy_us", "us", "computing + not overlapped + memcpy_exposed_us"),
        Field("source", "text", "the file the row came from (step_trace_source), or cluster (msprof-analyze's "
              "cluster files)", computed=True),
        Field("type", "text", "cluster files: msprof-analyze's Type (rank)"),
        Field("index", "text", "cluster files: msprof-analyze's Index"),
        Field("dp_index", "index", "cluster files: the rank's data-parallel index, where written"),
        Field("pp_index", "index", "cluster files: its pipeline-parallel index"),
        Field("tp_index", "index", "cluster files: its tensor-parallel index"),
    ))
