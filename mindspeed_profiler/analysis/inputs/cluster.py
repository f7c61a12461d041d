"""msprof-analyze's cluster output (`msprof-analyze cluster -d DIR`, cluster_analysis_output/): one
`cluster` capture per directory holding any of cluster_step_trace_time.csv,
cluster_communication.json, cluster_communication_matrix.json, communication_group.json or (from
db input) cluster_analysis.db. Per rank and step: computing / communication / free as msprof-analyze
computed them (and per pipeline stage, its `stage` rows); the collectives' wait / transit time per
rank; the links by transport; the process groups. A file that is missing or unreadable (a damaged
db too) is a warning naming it, never a failure of the others."""
from __future__ import annotations

import sqlite3
from pathlib import Path

from mindspeed_profiler.core import formats

from ..analyzers import collectives
from ..analyzers.step_breakdown import finish_row
from mindspeed_profiler.analysis.pipeline.discover import Capture, not_a_regular_file, rel
from ..parsing import ascend_comm
from ..parsing.ascend_db import CLUSTER_TABLES, read_cluster_db
from ..parsing.ascend_files import STEP_TRACE_DB_COLUMNS, read_step_trace_time, step_trace_rows
from . import InputKind, register_input


def _claim(root: Path, d: Path, names: list[str], claimed: set[str]) -> list[Capture]:
    present = [n for n in formats.CLUSTER_FILES if n in names and n not in claimed]
    if not present:
        return []
    claimed.update(present)
    bad = [c for c in (not_a_regular_file(root, d / n) for n in present) if c is not None]
    good = [n for n in present if not_a_regular_file(root, d / n) is None]
    if not good:
        return bad
    return bad + [Capture(path=rel(root, d / good[0]), kind="cluster", files=[rel(root, d / n) for n in good])]


def _split_ranks(rows: list[dict]) -> tuple[list[dict], list[dict]]:
    ranks, stages = [], []
    for r in rows:
        finish_row(r)
        kind = (r.get("type") or "").lower()
        if kind == "rank":
            try:
                r["rank"] = int(float(r["index"]))
            except (TypeError, ValueError):
                continue
            ranks.append(r)
        elif kind == "stage":
            stages.append(r)
    return ranks, stages


def _read_db(path: Path) -> dict[str, list[dict] | None]:
    db = read_cluster_db(path)
    if not any(rows is not None for rows in db.values()):   # another program's db under this name
        raise ValueError(f"none of msprof-analyze's tables ({', '.join(CLUSTER_TABLES)})")
    return db


def analyse(root: Path, cap: Capture, top_n: int, want_events: bool) -> tuple[dict, None]:
    files = {Path(f).name: root / f for f in cap.files}
    out: dict = {"ranks": [], "stages": [], "communication": None, "groups": None}
    warnings: list[str] = []
    read_any = False
    crow = lrow = grow = None
    # a damaged file (a db of garbage bytes, truncated, of other tables; a csv or json that does not
    # parse) is a warning: what the other files give is still analysed
    broken = (OSError, ValueError, KeyError, TypeError, OverflowError, sqlite3.Error)

    def attempt(name: str, fn):
        nonlocal read_any
        if name not in files:
            return None
        try:
            got = fn(files[name])
            read_any = True
            return got
        except broken as exc:
            warnings.append(f"{name}: unreadable ({type(exc).__name__}: {exc})")
            return None

    db = attempt(formats.CLUSTER_DB_FILE, _read_db) or {}

    def from_db(table: str, fn):
        """A table of the db, where the file of the same rows is missing or unreadable."""
        if not db.get(table):
            return None
        try:
            return fn(db[table])
        except broken as exc:
            warnings.append(f"{formats.CLUSTER_DB_FILE}: table {table} unreadable ({type(exc).__name__}: {exc})")
            return None

    rows = attempt(formats.CLUSTER_STEP_TRACE_FILE, read_step_trace_time)
    if rows is None:
        rows = from_db("ClusterStepTraceTime", lambda t: step_trace_rows(t, STEP_TRACE_DB_COLUMNS))
    if rows is not None:
        out["ranks"], out["stages"] = _split_ranks(rows)
        if not out["ranks"]:
            warnings.append(f"{formats.CLUSTER_STEP_TRACE_FILE}: no per-rank rows (Type == 'rank')")
    crow = attempt(formats.CLUSTER_COMMUNICATION_FILE, lambda p: ascend_comm.collective_rows(ascend_comm.load_json(p)))
    if crow is None:
        crow = from_db("ClusterCommunicationTime", ascend_comm.collective_rows_from_db)
    lrow = attempt(formats.CLUSTER_MATRIX_FILE, lambda p: ascend_comm.link_rows(ascend_comm.load_json(p)))
    if lrow is None:
        lrow = from_db("ClusterCommunicationMatrix", ascend_comm.link_rows_from_db)
    grow = attempt(formats.CLUSTER_GROUP_FILE, lambda p: ascend_comm.group_rows(ascend_comm.load_json(p)))
    if grow is None:
        grow = from_db("CommunicationGroupMapping", ascend_comm.group_rows_from_db)
    if crow or lrow:
        out["communication"] = {"collectives": collectives.collective_summary(crow or [], top_n),
                                "per_rank": collectives.per_rank(crow or []), "links": collectives.link_summary(lrow or [])}
    out["groups"] = grow
    if not read_any:
        raise ValueError("; ".join(warnings) or "no readable msprof-analyze output")
    out["warnings"] = warnings
    return out, None


register_input(InputKind("cluster", analyse, order=80, claim_files=_claim,
                         claims_file_root=lambda name: name in formats.CLUSTER_FILES))
