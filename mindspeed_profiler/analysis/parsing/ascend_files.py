"""torch_npu's parsed output (ASCEND_PROFILER_OUTPUT): the CSV files and the db export, read
into plain tables. Quirks are real and handled: values padded with a tab, empty or "N/A" cells,
a UTF-8 BOM, timestamps with more digits than a float64 keeps."""
from __future__ import annotations

import csv
import sqlite3
from dataclasses import dataclass
from pathlib import Path

import numpy as np


def clean(v) -> str:
    # torch_npu pads some values with a tab ("1736413971558972.912\t") so Excel keeps the digits
    return v.strip().strip("\t").strip() if isinstance(v, str) else v


def read_csv(path: Path) -> list[dict]:
    with open(path, newline="", encoding="utf-8-sig") as f:
        rows = [{clean(k): clean(v) for k, v in r.items() if k is not None} for r in csv.DictReader(f)]
    if not rows:
        raise ValueError(f"{path.name}: no data rows")
    return rows


def fnum(v) -> float:
    try:
        return float(clean(v))
    except (TypeError, ValueError):
        return float("nan")


def exact_us(v: str) -> tuple[int, float]:
    """'1736413971558972.912' -> (1736413971558972, 0.912) without float64 rounding."""
    whole, _, frac = clean(v).partition(".")
    return int(whole), float("0." + frac) if frac else 0.0


@dataclass
class KernelDetails:
    """The usable rows of kernel_details.csv; ts relative to `base` (whole microseconds)."""

    names: list[str]
    types: list[str]
    cores: list[str]
    step_ids: list[str]
    ts: np.ndarray
    dur: np.ndarray
    base: int
    n_bad: int   # rows without a usable start time or duration: counted, never summed as NaN


def read_kernel_details(path: Path) -> KernelDetails:
    rows = read_csv(path)
    missing = [c for c in ("Name", "Start Time(us)", "Duration(us)") if c not in rows[0]]
    if missing:
        raise ValueError(f"{path.name}: missing column(s) {missing}; found {list(rows[0])[:12]}")

    def start(r):
        try:
            return exact_us(r["Start Time(us)"])
        except (TypeError, ValueError, AttributeError):
            return None
    parts = [start(r) for r in rows]
    good = [p is not None and np.isfinite(fnum(r["Duration(us)"])) and fnum(r["Duration(us)"]) >= 0
            for p, r in zip(parts, rows)]
    n_bad = len(rows) - sum(good)
    rows = [r for r, g in zip(rows, good) if g]
    parts = [p for p, g in zip(parts, good) if g]
    if not rows:
        raise ValueError(f"{path.name}: no row with a usable start time and duration")
    base = min(p[0] for p in parts)
    return KernelDetails(
        names=[r["Name"] for r in rows], types=[r.get("Type", "") for r in rows],
        cores=[r.get("Accelerator Core", "") for r in rows], step_ids=[clean(r.get("Step Id", "")) for r in rows],
        ts=np.array([(w - base) + f for w, f in parts]), dur=np.array([fnum(r["Duration(us)"]) for r in rows]),
        base=base, n_bad=n_bad)


STEP_COLUMNS = {"Computing": "computing_us", "Communication(Not Overlapped)": "communication_exposed_us",
                "Overlapped": "overlapped_us", "Communication": "communication_us", "Free": "free_us",
                "Stage": "stage_us", "Bubble": "bubble_us"}


def read_step_trace_time(path: Path) -> list[dict]:
    """Per-step rows of step_trace_time.csv (one capture, or msprof-analyze's cluster file) as
    dicts of microseconds. dur_us is the file's own Stage column when it has one (on a cluster file's
    `stage` rows every other column is a per-column maximum over the ranks, so their sum is no
    time at all); else computing + exposed communication + free (everything the device did or
    waited for)."""
    out = []
    for r in read_csv(path):
        row = {"step": clean(r.get("Step", "")) or None}
        for col, key in STEP_COLUMNS.items():
            if col in r:
                row[key] = fnum(r[col])
        stage = row.get("stage_us")
        row["dur_us"] = stage if stage is not None and stage == stage and stage > 0 else \
            sum(row.get(k, 0.0) for k in ("computing_us", "communication_exposed_us", "free_us"))
        if "Type" in r:
            row["type"], row["index"] = r.get("Type"), r.get("Index")
        out.append(row)
    return out


@dataclass
class ProfilerDb:
    """What the analysis uses of torch_npu's `ascend_pytorch_profiler_*.db` (msprof db schema:
    TASK(startNs, endNs, globalTaskId, ...), COMPUTE_TASK_INFO(name, globalTaskId, ...),
    COMMUNICATION_OP(opName, startNs, endNs, ...), STRING_IDS(id, value))."""

    tasks: np.ndarray             # (n, 3): startNs, endNs, globalTaskId
    task_names: dict[int, str]    # globalTaskId -> name, for compute tasks
    comm: np.ndarray              # (m, 2): startNs, endNs of communication ops


def read_profiler_db(path: Path) -> ProfilerDb:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if "TASK" not in tables:
            raise ValueError(f"{path.name}: no TASK table (tables: {sorted(tables)[:12]})")
        strings = dict(con.execute("SELECT id, value FROM STRING_IDS")) if "STRING_IDS" in tables else {}
        task = np.array(con.execute("SELECT startNs, endNs, globalTaskId FROM TASK").fetchall(), dtype=np.float64).reshape(-1, 3)
        names = {}
        if "COMPUTE_TASK_INFO" in tables:
            names = {int(g): strings.get(n, str(n)) for n, g in con.execute("SELECT name, globalTaskId FROM COMPUTE_TASK_INFO")}
        comm = np.empty((0, 2))
        if "COMMUNICATION_OP" in tables:
            comm = np.array(con.execute("SELECT startNs, endNs FROM COMMUNICATION_OP").fetchall(), dtype=np.float64).reshape(-1, 2)
    finally:
        con.close()
    if not len(task) and not len(comm):
        raise ValueError(f"{path.name}: TASK and COMMUNICATION_OP are empty")
    return ProfilerDb(task, names, comm)
