"""torch_npu's and msprof-analyze's communication files, read into flat rows:

- `communication.json` (per rank) and msprof-analyze's `cluster_communication.json`: per
  collective op (`hcom_*`), its elapse / transit / wait / synchronisation / idle time and the
  bandwidth per transport;
- `communication_matrix.json` (per rank) and `cluster_communication_matrix.json`: per link
  (`src-dst` ranks) and op group, transport type (HCCS, PCIE, RDMA, SDMA, LOCAL), size and time;
- `communication_group.json`: the process groups (collective / p2p rank sets; newer files add
  each group's name and parallel kind, `pg_name`).

The nesting differs between tools and releases (type / step / op / rank in a capture's file;
rank set / step / op / rank, or type / step / op / rank, in msprof-analyze's), so the readers walk
the tree and tell each level by its keys: "p2p" / "collective", "(0, 1)" rank sets, "step<N>",
"op@group", rank numbers and "src-dst" links.
"""
from __future__ import annotations

import math

import re
from pathlib import Path

import orjson

from mindspeed_profiler.core.fileio import connect_readonly

from .ascend_files import step_label
from .numbers import INT64, real, real_or

MAX_COMM_BYTES = 512 << 20
_RANK_SET = re.compile(r"^\(\s*\d+(?:\s*,\s*\d+)*\s*,?\s*\)$")
_STEP = re.compile(r"^step(.*)$")
_LINK = re.compile(r"^(\d+)-(\d+)$")
TYPES = ("p2p", "collective")
TIME_INFO = "Communication Time Info"
BANDWIDTH_INFO = "Communication Bandwidth Info"
TOTAL_OP = "Total Op Info"


def load_json(path: Path) -> dict:
    if path.stat().st_size > MAX_COMM_BYTES:
        raise ValueError(f"{path.name}: {path.stat().st_size >> 20} MB, more than {MAX_COMM_BYTES >> 20} MB")
    obj = orjson.loads(path.read_bytes())
    if not isinstance(obj, dict):
        raise ValueError(f"{path.name}: not a JSON object")
    return obj


def _walk(node, ctx: dict, leaf_key: str, out: list, depth: int = 0) -> None:
    if not isinstance(node, dict) or depth > 8:
        return
    if leaf_key in node:
        out.append((ctx, node))
        return
    for k, v in node.items():
        k = str(k)
        c = dict(ctx)
        if k in TYPES:
            c["type"] = k
        elif _RANK_SET.match(k):
            c["rank_set"] = [int(x) for x in re.findall(r"\d+", k)]
        elif _STEP.match(k) and "step" not in c:
            c["step"] = step_label(_STEP.match(k).group(1))
        elif k.isdigit():
            c["rank"] = int(k)
        elif _LINK.match(k):
            a, b = _LINK.match(k).groups()
            c["src"], c["dst"] = int(a), int(b)
        else:
            op, _, group = k.partition("@")
            c["op"], c["group"] = op, group or None
        _walk(v, c, leaf_key, out, depth + 1)


def _rank(v) -> int | None:
    """A rank of a db row (INTEGER, or a REAL / text of one); None for NULL or a bad one."""
    try:
        x = real(v)
    except ValueError:
        return None
    return int(x) if x is not None and x.is_integer() and abs(x) < INT64 else None


def collective_rows(obj: dict, rank: int | None = None) -> list[dict]:
    """One row per (rank, step, op): times in microseconds; `rank` for a capture's own file."""
    leaves: list = []
    _walk(obj, {}, TIME_INFO, leaves)
    rows = []
    for ctx, node in leaves:
        if ctx.get("op") == TOTAL_OP:
            continue
        t = node.get(TIME_INFO) if isinstance(node.get(TIME_INFO), dict) else {}
        bw = node.get(BANDWIDTH_INFO) if isinstance(node.get(BANDWIDTH_INFO), dict) else {}
        rows.append({
            "rank": ctx.get("rank", rank), "step": ctx.get("step"), "type": ctx.get("type"), "op": ctx.get("op"),
            "group": ctx.get("group"), "start_us": real_or(t.get("Start Timestamp(us)")) or None,
            "elapse_us": real_or(t.get("Elapse Time(ms)")) * 1e3, "transit_us": real_or(t.get("Transit Time(ms)")) * 1e3,
            "wait_us": real_or(t.get("Wait Time(ms)")) * 1e3, "sync_us": real_or(t.get("Synchronization Time(ms)")) * 1e3,
            "idle_us": real_or(t.get("Idle Time(ms)")) * 1e3,
            "transports": {k: {"size_mb": real_or(v.get("Transit Size(MB)")), "time_ms": real_or(v.get("Transit Time(ms)"))}
                           for k, v in bw.items() if isinstance(v, dict) and real_or(v.get("Transit Size(MB)"))}})
    return rows


def link_rows(obj: dict) -> list[dict]:
    """One row per (step, op group, src-dst link): transport, size (MB), time (ms), bandwidth (GB/s)."""
    leaves: list = []
    _walk(obj, {}, "Transport Type", leaves)
    return [{"step": ctx.get("step"), "type": ctx.get("type"), "op": ctx.get("op"), "group": ctx.get("group"),
             "src": ctx.get("src"), "dst": ctx.get("dst"), "transport": str(node.get("Transport Type")),
             "op_name": node.get("Op Name"), "size_mb": real_or(node.get("Transit Size(MB)")),
             "time_ms": real_or(node.get("Transit Time(ms)")), "bandwidth_gbps": real_or(node.get("Bandwidth(GB/s)"))}
            for ctx, node in leaves if ctx.get("src") is not None]


def group_rows(obj: dict) -> list[dict]:
    """communication_group.json: [{type, ranks, name, pg_name}] (name / pg_name where written)."""
    out = []
    info = obj.get("comm_group_parallel_info")
    if isinstance(info, list):
        for g in info:
            if isinstance(g, dict) and isinstance(g.get("rank_set"), list):
                out.append({"type": g.get("type"), "ranks": [r for r in g["rank_set"] if isinstance(r, int)],
                            "name": g.get("group_name") or None, "pg_name": g.get("pg_name") or None})
        if out:
            return out
    for t in TYPES:
        for ranks in obj.get(t) or []:
            if isinstance(ranks, list):
                out.append({"type": t, "ranks": [r for r in ranks if isinstance(r, int)], "name": None, "pg_name": None})
    return out


def _db_step(v):
    m = _STEP.match(str(v or ""))
    return step_label(m.group(1)) if m else step_label(v)


def collective_rows_from_db(rows: list[dict]) -> list[dict]:
    """cluster_analysis.db's ClusterCommunicationTime, or torch_npu's analysis.db CommAnalyzerTime
    (one rank's; times in ms), as collective_rows()."""
    return [{"rank": r.get("rank_id"), "step": _db_step(r.get("step")),
             "type": r.get("type"), "op": r.get("hccl_op_name"), "group": r.get("group_name"),
             "start_us": real_or(r.get("start_timestamp")) or None,
             "elapse_us": real_or(r.get("elapsed_time", r.get("elapse_time"))) * 1e3,
             "transit_us": real_or(r.get("transit_time")) * 1e3, "wait_us": real_or(r.get("wait_time")) * 1e3,
             "sync_us": real_or(r.get("synchronization_time")) * 1e3, "idle_us": real_or(r.get("idle_time")) * 1e3, "transports": {}}
            for r in rows if r.get("hccl_op_name") and r.get("hccl_op_name") != TOTAL_OP]


def link_rows_from_db(rows: list[dict]) -> list[dict]:
    """cluster_analysis.db's ClusterCommunicationMatrix, or analysis.db's CommAnalyzerMatrix, as link_rows()."""
    return [{"step": _db_step(r.get("step")), "type": r.get("type"), "op": r.get("hccl_op_name"),
             "group": r.get("group_name"), "src": _rank(r.get("src_rank")), "dst": _rank(r.get("dst_rank")),
             "transport": str(r.get("transport_type")), "op_name": r.get("op_name"), "size_mb": real_or(r.get("transit_size")),
             "time_ms": real_or(r.get("transit_time")), "bandwidth_gbps": real_or(r.get("bandwidth"))}
            for r in rows if _rank(r.get("src_rank")) is not None and _rank(r.get("dst_rank")) is not None]


def group_rows_from_db(rows: list[dict]) -> list[dict]:
    """cluster_analysis.db's CommunicationGroupMapping as group_rows()."""
    return [{"type": r.get("type"), "ranks": [int(x) for x in re.findall(r"\d+", str(r.get("rank_set") or ""))],
             "name": r.get("group_name") or None, "pg_name": r.get("pg_name") or None} for r in rows]


# msprof-analyze 26.2.0's slow_rank input (prof_exports/cluster_time_summary_export.py:21-34,
# CommunicationTimeExport): every collective op of the db export with a runtime call (the join on
# CANN_API, which also repeats an op per call sharing its connection id, as the recipe sees it)
SLOW_RANK_QUERY = (
    "SELECT si_group.value, si_op.value, o.startNs, (o.endNs - o.startNs) / 1000.0 "
    "FROM COMMUNICATION_OP o JOIN STRING_IDS si_group ON o.groupName = si_group.id "
    "JOIN STRING_IDS si_op ON o.opName = si_op.id JOIN CANN_API ON CANN_API.connectionId = o.connectionId")


def comm_ops_from_profiler_db(path: Path) -> list[dict]:
    """The collective ops of a db export (ascend_pytorch_profiler_*.db) as the slow_rank recipe reads
    them: [{group, op, start_ns, elapse_us}] in the db's order; [] without the tables."""
    import sqlite3
    con = connect_readonly(path)
    try:
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if not {"COMMUNICATION_OP", "STRING_IDS", "CANN_API"} <= tables:
            return []
        out = []
        for g, o, s, e in con.execute(SLOW_RANK_QUERY):
            try:
                start, elapse = int(s), float(e)
            except (TypeError, ValueError, OverflowError):   # NULL, text or inf: a row the vote cannot use
                continue
            if o is not None and math.isfinite(elapse):
                out.append({"group": str(g), "op": str(o), "start_ns": start, "elapse_us": elapse})
        return out
    finally:
        con.close()
