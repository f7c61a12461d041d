"""torch_npu's db export (`ascend_pytorch_profiler_*.db`, the msprof db schema; times in ns) read
into the shapes of the text export, so that one analysis serves both:

- `events`: the rows trace_view.json would hold, as an `Events` table: host ops (PYTORCH_API, with
  the ProfilerStep ranges of STEP_TIME where PYTORCH_API lacks them), runtime calls (CANN_API),
  compute tasks (COMPUTE_TASK_INFO joined to TASK: the only tasks torch_npu counts as computing,
  with their task type), copy tasks, the collective ops (COMMUNICATION_OP, one "Group N
  Communication" lane per group) and torch_npu's Overlap Analysis lanes (OVERLAP_ANALYSIS);
- `kernels`: kernel_details.csv's rows (compute tasks by op type and accelerator core, the
  collective ops with core HCCL);
- the rank / device map (RANK_DEVICE_MAP), the NPU's name (NPU_INFO), the memory records
  (MEMORY_RECORD, as memory_record.csv has them).
"""
from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mindspeed_profiler.core.fileio import connect_readonly

from .ascend_files import KernelDetails
from .ascend_tasks import ASCEND_HARDWARE, COPY_TASKS, HCCL_PROCESS, LANE_PROCESS, LANES, PYTORCH_API_CATS
from .events import Events, EventTable
from .numbers import bad_cells, integer, note_bad

_PIDS = {"Python": 1, "CANN": 2, ASCEND_HARDWARE: 3, HCCL_PROCESS: 4, LANE_PROCESS: 5}


@dataclass
class ProfilerDb:
    events: Events
    kernels: KernelDetails | None
    rank: int | None = None
    device_id: int | None = None
    npu: str | None = None
    memory: list[dict] = field(default_factory=list)   # {component, ts_us, allocated_bytes, reserved_bytes, active_bytes}
    tables: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)   # rows left out for a NULL or junk value, by table.column


def _span(start, end) -> tuple[str, float] | None:
    """(ts as exact microsecond text, dur in us) of a row, None when its times are unusable (the
    event table keeps the sub-us digits of text timestamps)."""
    a, b = integer(start), integer(end)
    if a is None or b is None or b < a:
        return None
    return f"{a // 1000}.{a % 1000:03d}", (b - a) / 1e3


def _x(name, cat, pid, tid, start, end, args=None) -> dict | None:
    sp = _span(start, end)
    if sp is None:
        return None
    e = {"ph": "X", "name": name, "cat": cat, "pid": pid, "tid": tid, "ts": sp[0], "dur": sp[1]}
    if args:
        e["args"] = args
    return e


class _Db:
    def __init__(self, path: Path) -> None:
        self.con = connect_readonly(path)
        self.tables = {r[0] for r in self.con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        self.strings = dict(self.con.execute("SELECT id, value FROM STRING_IDS")) if "STRING_IDS" in self.tables else {}

    def rows(self, sql: str, table: str) -> list:
        return self.con.execute(sql).fetchall() if table in self.tables else []

    def s(self, i) -> str:
        return str(self.strings.get(i, i))


def read_profiler_db(path: Path) -> ProfilerDb:
    """Raises ValueError when the file holds neither tasks nor collective ops (not an export)."""
    db = _Db(path)
    try:
        return _read(db, path)
    finally:
        db.con.close()


def _read(db: _Db, path: Path) -> ProfilerDb:
    if "TASK" not in db.tables and "COMMUNICATION_OP" not in db.tables:
        raise ValueError(f"{path.name}: no TASK or COMMUNICATION_OP table (tables: {sorted(db.tables)[:12]})")
    s = db.s
    bad: dict = {}   # "TABLE.column" -> (rows left out, the first value)
    rank, device = _rank_device(db, bad)
    ev: list[dict] = [{"ph": "M", "name": "process_name", "pid": pid, "args": {"name": n}} for n, pid in _PIDS.items()]
    # host: PYTORCH_API (+ STEP_TIME's ProfilerStep ranges where PYTORCH_API has none)
    has_step = False
    for start, end, tid, conn, name, typ in db.rows(
            "SELECT startNs, endNs, globalTid, connectionId, name, type FROM PYTORCH_API", "PYTORCH_API"):
        n = s(name)
        has_step = has_step or n.startswith("ProfilerStep#")
        ev.append(_x(n, PYTORCH_API_CATS.get(typ, "cpu_op"), 1, tid, start, end, {"connection_id": conn}))
    if not has_step:
        for sid, start, end in db.rows("SELECT id, startNs, endNs FROM STEP_TIME", "STEP_TIME"):
            ev.append(_x(f"ProfilerStep#{sid}", "cpu_op", 1, 0, start, end))
    for start, end, tid, conn, name in db.rows(
            "SELECT startNs, endNs, globalTid, connectionId, name FROM CANN_API", "CANN_API"):
        ev.append(_x(s(name), "runtime", 2, tid, start, end, {"connection_id": conn}))
    # device: compute tasks (by their compute info), copies; the tasks' own device id filter
    dev_clause = f" WHERE t.deviceId = {device}" if device is not None else ""
    compute = db.rows("SELECT t.startNs, t.endNs, t.streamId, t.connectionId, c.name, c.taskType, c.opType "
                      "FROM COMPUTE_TASK_INFO c JOIN TASK t ON c.globalTaskId = t.globalTaskId" + dev_clause,
                      "COMPUTE_TASK_INFO") if "TASK" in db.tables else []
    for start, end, stream, conn, name, ttype, _op in compute:
        ev.append(_task(start, end, stream, conn, s(name), s(ttype)))
    copy_types = [integer(k) for k, v in db.strings.items() if v in COPY_TASKS]   # ids into SQL: ints only
    copy_types = [k for k in copy_types if k is not None]
    if copy_types and "TASK" in db.tables:
        ids = ",".join(map(str, copy_types))
        for start, end, stream, conn, ttype in db.rows(
                "SELECT t.startNs, t.endNs, t.streamId, t.connectionId, t.taskType FROM TASK t "
                f"WHERE t.taskType IN ({ids}) AND t.globalTaskId NOT IN (SELECT globalTaskId FROM COMPUTE_TASK_INFO)"
                + (f" AND t.deviceId = {device}" if device is not None else ""), "COMPUTE_TASK_INFO"):
            ev.append(_task(start, end, stream, conn, s(ttype), s(ttype)))
    groups: dict = {}
    comm = db.rows("SELECT opName, startNs, endNs, connectionId, groupName, opType, algType, count, dataType "
                   "FROM COMMUNICATION_OP", "COMMUNICATION_OP")
    for name, start, end, conn, group, op_type, alg, count, dtype in comm:
        tid = groups.setdefault(group, len(groups))
        ev.append(_x(s(name), None, 4, tid, start, end, {"connection_id": conn, "group": s(group), "alg_type": s(alg),
                                                        "count": count}))
    for group, tid in groups.items():
        ev.append({"ph": "M", "name": "thread_name", "pid": 4, "tid": tid, "args": {"name": f"Group {tid} Communication"}})
    lane_sql = "SELECT startNs, endNs, type FROM OVERLAP_ANALYSIS" + (f" WHERE deviceId = {device}" if device is not None else "")
    for start, end, typ in db.rows(lane_sql, "OVERLAP_ANALYSIS"):
        lane = integer(typ)
        if lane is not None and 0 <= lane < len(LANES):
            ev.append(_x(LANES[lane], None, 5, lane, start, end))
        else:
            note_bad(bad, "OVERLAP_ANALYSIS.type", typ)
    if not compute and not comm:
        raise ValueError(f"{path.name}: no compute tasks and no collective ops")
    table = EventTable()
    table.add_batch([e for e in ev if e is not None])   # rows with unusable times are left out
    events = table.finish()
    npu = db.rows("SELECT name FROM NPU_INFO", "NPU_INFO")
    return ProfilerDb(events=events, kernels=_kernels(compute, comm, s), rank=rank, device_id=device,
                      npu=str(npu[0][0]) if npu and npu[0][0] is not None else None, memory=_memory(db, device),
                      tables=sorted(db.tables), warnings=bad_cells(path.name, bad, "an integer (a lane: 0 to "
                                                                   f"{len(LANES) - 1})", "their rows left out"))


def _rank_device(db: _Db, bad: dict) -> tuple[int | None, int | None]:
    """(rank, device id) of RANK_DEVICE_MAP's first usable row; a row with a NULL or junk value is
    noted into `bad` and skipped; a negative rank (no torch.distributed) is no rank."""
    for r, d in db.rows("SELECT rankId, deviceId FROM RANK_DEVICE_MAP", "RANK_DEVICE_MAP"):
        rank, device = integer(r), integer(d)
        if rank is None or device is None:
            note_bad(bad, "RANK_DEVICE_MAP." + ("rankId" if rank is None else "deviceId"), r if rank is None else d)
            continue
        return (rank if rank >= 0 else None), device
    return None, None


def _task(start, end, stream, conn, name: str, ttype: str) -> dict | None:
    return _x(name, None, 3, stream, start, end, {"Task Type": ttype, "connection_id": conn})


def _kernels(compute: list, comm: list, s) -> KernelDetails | None:
    """kernel_details.csv's rows: compute tasks (type = op type, core = task type) and the
    collective ops (core HCCL); Step Id unknown here (the steps come from the events)."""
    rows = [(s(n), s(op), s(tt), integer(st), integer(en)) for st, en, _s, _c, n, tt, op in compute]
    rows += [(s(n), s(op), "HCCL", integer(st), integer(en)) for n, st, en, _c, _g, op, _a, _n, _d in comm]
    rows = [r for r in rows if r[3] is not None and r[4] is not None and r[4] >= r[3]]
    if not rows:
        return None
    base_ns = min(r[3] for r in rows) // 1000 * 1000
    return KernelDetails(names=[r[0] for r in rows], types=[r[1] for r in rows], cores=[r[2] for r in rows],
                         step_ids=[""] * len(rows), ts=np.array([(r[3] - base_ns) / 1e3 for r in rows]),
                         dur=np.array([(r[4] - r[3]) / 1e3 for r in rows]), base=base_ns // 1000, n_bad=0)


def _memory(db: _Db, device: int | None) -> list[dict]:
    sql = "SELECT component, timestamp, totalAllocated, totalReserved, totalActive FROM MEMORY_RECORD"
    if device is not None:
        sql += f" WHERE deviceId = {device}"
    return [{"component": db.s(c), "ts_us": (integer(t) or 0) / 1e3, "allocated_bytes": integer(a), "reserved_bytes": integer(r),
             "active_bytes": integer(ac)} for c, t, a, r, ac in db.rows(sql, "MEMORY_RECORD")]


ANALYSIS_TABLES = ("StepTraceTime", "CommAnalyzerTime", "CommAnalyzerMatrix")


def read_analysis_db(path: Path) -> dict[str, list[dict] | None]:
    """torch_npu's own analysis db beside the export: StepTraceTime (step_trace_time.csv's columns,
    snake_case; us), CommAnalyzerTime / CommAnalyzerMatrix (communication.json's and
    communication_matrix.json's rows; ms). None for an absent table."""
    con = connect_readonly(path)
    try:
        return {name: _table(con, name) for name in ANALYSIS_TABLES}
    finally:
        con.close()


def _table(con, name: str) -> list[dict] | None:
    if not con.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (name,)).fetchone():
        return None
    cur = con.execute(f'SELECT * FROM "{name}"')
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r)) for r in cur.fetchall()]


CLUSTER_TABLES = ("ClusterStepTraceTime", "ClusterCommunicationTime", "ClusterCommunicationMatrix", "CommunicationGroupMapping")


def read_cluster_db(path: Path) -> dict[str, list[dict] | None]:
    """msprof-analyze's cluster_analysis.db (from db input): its tables as rows (None: absent)."""
    con = connect_readonly(path)
    try:
        return {name: _table(con, name) for name in CLUSTER_TABLES}
    finally:
        con.close()
