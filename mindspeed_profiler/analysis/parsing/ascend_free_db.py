"""The rows msprof-analyze's free_analysis recipe reads from a torch_npu db
(`ascend_pytorch_profiler_*.db`), read with sqlite3 (read-only) into plain values for
analyzers/ascend_free.py. The queries are those of msprof-analyze 26.2.0's
prof_exports/free_analysis_export.py ("the export"):

- busy intervals (export:19-32): every compute task, TASK joined to COMPUTE_TASK_INFO on
  globalTaskId, and every collective op of COMMUNICATION_OP, as (startNs, endNs). The export merges
  them in SQL (export:34-63); here ascend_free.busy_ranges does, on the rows;
- link rows (export:76-91): every TASK with its type (STRING_IDS), its CANN launch (CANN_API on
  connectionId) and its PyTorch op (PYTORCH_API via CONNECTION_IDS: PYTORCH_API.connectionId is a
  CONNECTION_IDS.id), LEFT JOINs, in TASK.startNs order.

msprof-analyze reads the db only (`cluster -m free_analysis` on a text export stops with "only
supports DB as input data"). A db without COMMUNICATION_OP (a job without collectives) makes its
SQL fail and the recipe write nothing for the rank; here the compute tasks alone are the busy time
and a warning says so.
"""
from __future__ import annotations

import sqlite3
from pathlib import Path

from mindspeed_profiler.core.fileio import connect_readonly

from .numbers import integer

SOURCE = "TASK, COMPUTE_TASK_INFO, COMMUNICATION_OP, CANN_API, PYTORCH_API, CONNECTION_IDS, STRING_IDS"
BUSY_TABLES = ("TASK", "COMPUTE_TASK_INFO")
LINK_TABLES = ("TASK", "CANN_API", "STRING_IDS", "CONNECTION_IDS", "PYTORCH_API")

COMPUTE_SQL = "SELECT TASK.startNs, TASK.endNs FROM COMPUTE_TASK_INFO CTI JOIN TASK ON TASK.globalTaskId = CTI.globalTaskId"
COMM_SQL = "SELECT startNs, endNs FROM COMMUNICATION_OP"
LINK_SQL = """
SELECT task_str.value AS task_type, TASK.startNs AS task_ts, TASK.endNs AS task_end,
       cann.startNs AS cann_ts, cann.endNs AS cann_end, pytorch.startNs AS pytorch_ts, pytorch.endNs AS pytorch_end
FROM TASK
LEFT JOIN CANN_API cann ON TASK.connectionId = cann.connectionId
LEFT JOIN STRING_IDS AS task_str ON TASK.taskType = task_str.id
LEFT JOIN CONNECTION_IDS conn ON conn.connectionId = TASK.connectionId
LEFT JOIN PYTORCH_API pytorch ON pytorch.connectionId = conn.id
ORDER BY TASK.startNs ASC
"""
LINK_COLUMNS = ("task_type", "task_ts", "task_end", "cann_ts", "cann_end", "pytorch_ts", "pytorch_end")


def _connect(path: Path) -> sqlite3.Connection:
    """A read-only connection; OSError when the file is missing or not a database."""
    path = Path(path)
    if not path.is_file():
        raise OSError(f"{path}: no such db file")
    try:
        con = connect_readonly(path)
        con.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.Error as e:
        raise OSError(f"{path}: not a readable sqlite db ({e})") from e
    return con


def _tables(con: sqlite3.Connection) -> set[str]:
    return {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")}


def db_tables(path: Path) -> set[str]:
    """The db's table names (OSError when it cannot be read)."""
    con = _connect(path)
    try:
        return _tables(con)
    finally:
        con.close()


def _require(path: Path, have: set[str], need: tuple[str, ...], what: str) -> None:
    missing = [t for t in need if t not in have]
    if missing:
        raise ValueError(f"{Path(path).name}: no {', '.join(missing)} table: the {what} cannot be read "
                         "(msprof-analyze's free_analysis writes nothing for this rank)")


# a db time as int ns (some schema versions store TEXT), None for NULL / junk / a REAL inf
_ns = integer


def read_busy_intervals(path: Path) -> tuple[list[tuple[int, int]], list[str]]:
    """(start_ns, end_ns) of every compute task and collective op (unmerged), and warnings.
    ValueError without TASK / COMPUTE_TASK_INFO; rows with a NULL time are left out and counted."""
    con = _connect(path)
    try:
        have = _tables(con)
        _require(path, have, BUSY_TABLES, "busy time")
        rows = con.execute(COMPUTE_SQL).fetchall()
        warnings = []
        if "COMMUNICATION_OP" in have:
            rows += con.execute(COMM_SQL).fetchall()
        else:
            warnings.append(f"{Path(path).name}: no COMMUNICATION_OP table: the busy time is the compute tasks "
                            "alone (msprof-analyze's free_analysis writes nothing for this rank)")
    except sqlite3.Error as e:
        raise ValueError(f"{Path(path).name}: busy time query failed ({e})") from e
    finally:
        con.close()
    out = [(s, e) for s, e in ((_ns(a), _ns(b)) for a, b in rows) if s is not None and e is not None]
    if len(out) < len(rows):
        warnings.append(f"{Path(path).name}: {len(rows) - len(out)} busy row(s) without a start or end left out")
    return out, warnings


def read_task_links(path: Path) -> list[dict]:
    """The export's device task -> CANN -> PyTorch rows as dicts of LINK_COLUMNS, in the query's
    order, the values as the db stores them (times int ns, or text: torch_npu's PYTORCH_API declares
    startNs / endNs TEXT; None for NULL): the recipe's tests depend on those types
    (ascend_free.normalise_links). ValueError when a table is missing."""
    con = _connect(path)
    try:
        _require(path, _tables(con), LINK_TABLES, "task -> CANN -> PyTorch link")
        rows = con.execute(LINK_SQL).fetchall()
    except sqlite3.Error as e:
        raise ValueError(f"{Path(path).name}: link query failed ({e})") from e
    finally:
        con.close()
    return [dict(zip(LINK_COLUMNS, r)) for r in rows]
