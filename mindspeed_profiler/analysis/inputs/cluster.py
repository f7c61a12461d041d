"""msprof-analyze's cluster output (`msprof-analyze cluster -d DIR`, cluster_analysis_output/): one
`cluster` capture per directory holding any of cluster_step_trace_time.csv,
cluster_communication.json, cluster_communication_matrix.json, communication_group.json or (from
db input) cluster_analysis.db. Per rank and step: computing / communication / free as msprof-analyze
computed them (and per pipeline stage, its `stage` rows); the collectives' wait / transit time per
rank; the links by transport; the process groups. A file that is missing or unreadable is a note,
never a failure of the others."""
from __future__ import annotations

from pathlib import Path

from mindspeed_profiler import formats

from ..analyzers import collectives
from ..analyzers.step_breakdown import finish_row
from ..discover import Capture, not_a_regular_file, rel
from ..parsing import ascend_comm
from ..parsing.ascend_db import read_cluster_db
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


def analyse(root: Path, cap: Capture, top_n: int, want_events: bool) -> tuple[dict, None]:
    files = {Path(f).name: root / f for f in cap.files}
    out: dict = {"ranks": [], "stages": [], "communication": None, "groups": None}
    warnings: list[str] = []
    read_any = False
    crow = lrow = grow = None

    def attempt(name: str, fn):
        nonlocal read_any
        if name not in files:
            return None
        try:
            got = fn(files[name])
            read_any = True
            return got
        except (OSError, ValueError, KeyError, TypeError) as exc:
            warnings.append(f"{name}: unreadable ({type(exc).__name__}: {exc})")
            return None

    rows = attempt(formats.CLUSTER_STEP_TRACE_FILE, read_step_trace_time)
    db = attempt(formats.CLUSTER_DB_FILE, read_cluster_db) or {}
    if rows is None and db.get("ClusterStepTraceTime"):
        rows = step_trace_rows(db["ClusterStepTraceTime"], STEP_TRACE_DB_COLUMNS)
    if rows is not None:
        out["ranks"], out["stages"] = _split_ranks(rows)
        if not out["ranks"]:
            warnings.append(f"{formats.CLUSTER_STEP_TRACE_FILE}: no per-rank rows (Type == 'rank')")
    crow = attempt(formats.CLUSTER_COMMUNICATION_FILE, lambda p: ascend_comm.collective_rows(ascend_comm.load_json(p)))
    if crow is None and db.get("ClusterCommunicationTime"):
        crow = ascend_comm.collective_rows_from_db(db["ClusterCommunicationTime"])
    lrow = attempt(formats.CLUSTER_MATRIX_FILE, lambda p: ascend_comm.link_rows(ascend_comm.load_json(p)))
    if lrow is None and db.get("ClusterCommunicationMatrix"):
        lrow = ascend_comm.link_rows_from_db(db["ClusterCommunicationMatrix"])
    grow = attempt(formats.CLUSTER_GROUP_FILE, lambda p: ascend_comm.group_rows(ascend_comm.load_json(p)))
    if grow is None and db.get("CommunicationGroupMapping"):
        grow = ascend_comm.group_rows_from_db(db["CommunicationGroupMapping"])
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
