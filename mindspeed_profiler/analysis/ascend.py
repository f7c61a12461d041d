"""Ascend captures: parsed text output (ASCEND_PROFILER_OUTPUT), the db export, and offline
parsing of raw captures through torch_npu (only where torch_npu + CANN work)."""
from __future__ import annotations

import csv
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np

from .kineto import COMM_RE, MEMCPY_RE, device_breakdown

OUTPUT_DIR = "ASCEND_PROFILER_OUTPUT"


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


def kernel_details(path: Path, top_n: int) -> dict:
    """Top kernels and the device breakdown from kernel_details.csv."""
    rows = read_csv(path)
    missing = [c for c in ("Name", "Start Time(us)", "Duration(us)") if c not in rows[0]]
    if missing:
        raise ValueError(f"{path.name}: missing column(s) {missing}; found {list(rows[0])[:12]}")
    # rows without a usable start / duration (empty cells, "N/A") are counted, never summed as NaN
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
    ts = np.array([(w - base) + f for w, f in parts])
    dur = np.array([fnum(r["Duration(us)"]) for r in rows])
    kind = [f"{r.get('Type', '')} {r.get('Accelerator Core', '')}" for r in rows]
    comm = np.array([bool(COMM_RE.search(k)) or "HCCL" in k.upper() or "COMMUNICATION" in k.upper() for k in kind])
    mem = np.array([bool(MEMCPY_RE.search(k + " " + r["Name"])) for k, r in zip(kind, rows)]) & ~comm
    dev = device_breakdown(ts, ts + dur, ~comm & ~mem, comm, mem)
    agg: dict[str, dict] = {}
    for r, d, c, m in zip(rows, dur, comm, mem):
        a = agg.setdefault(r["Name"], {"name": r["Name"], "type": r.get("Type", ""),
                                       "core": r.get("Accelerator Core", ""), "count": 0, "total_us": 0.0,
                                       "class": "communication" if c else "memcpy" if m else "compute"})
        a["count"] += 1
        a["total_us"] += float(d)
    by_type: dict[str, float] = {}
    for r, d in zip(rows, dur):
        by_type[r.get("Type", "")] = by_type.get(r.get("Type", ""), 0.0) + float(d)
    steps = sorted({clean(r.get("Step Id", "")) for r in rows} - {""})
    return {
        "device": dev, "start_us": base + float(ts.min()),
        "top_kernels": sorted(agg.values(), key=lambda a: -a["total_us"])[:top_n],
        "kernel_types": sorted(({"type": k, "total_us": v} for k, v in by_type.items()), key=lambda a: -a["total_us"])[:top_n],
        "n_kernels": len(rows), "n_bad_kernels": n_bad, "kernel_steps": steps,
    }


STEP_COLUMNS = {"Computing": "computing_us", "Communication(Not Overlapped)": "communication_exposed_us",
                "Overlapped": "overlapped_us", "Communication": "communication_us", "Free": "free_us",
                "Stage": "stage_us", "Bubble": "bubble_us"}


def step_trace_time(path: Path) -> list[dict]:
    """Per-step rows of step_trace_time.csv (one capture) as dicts of microseconds."""
    out = []
    for r in read_csv(path):
        row = {"step": clean(r.get("Step", "")) or None}
        for col, key in STEP_COLUMNS.items():
            if col in r:
                row[key] = fnum(r[col])
        # the step's time: everything the device did or waited for
        row["dur_us"] = sum(row.get(k, 0.0) for k in ("computing_us", "communication_exposed_us", "free_us"))
        if "Type" in r:
            row["type"], row["index"] = r.get("Type"), r.get("Index")
        out.append(row)
    return out


def db_summary(path: Path, top_n: int) -> dict:
    """Device breakdown and top kernels from torch_npu's `ascend_pytorch_profiler_*.db` (msprof
    db schema: TASK(startNs, endNs, globalTaskId, ...), COMPUTE_TASK_INFO(name, globalTaskId, opType...),
    COMMUNICATION_OP(opName, startNs, endNs, ...), STRING_IDS(id, value))."""
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
    # only named compute tasks count as compute (TASK also holds the HCCL tasks and sync events)
    named = np.array([int(g) in names for g in task[:, 2]], dtype=bool)
    t0 = float(min(task[:, 0].min() if len(task) else np.inf, comm[:, 0].min() if len(comm) else np.inf))
    ts = np.r_[task[named, 0], comm[:, 0]]
    end = np.r_[task[named, 1], comm[:, 1]]
    ts, end = (ts - t0) / 1e3, (end - t0) / 1e3
    is_comm = np.r_[np.zeros(named.sum(), bool), np.ones(len(comm), bool)]
    dev = device_breakdown(ts, end, ~is_comm, is_comm, np.zeros(len(ts), bool))
    agg: dict[str, dict] = {}
    for (s, e, g) in task[named]:
        n = names[int(g)]
        a = agg.setdefault(n, {"name": n, "count": 0, "total_us": 0.0, "class": "compute"})
        a["count"] += 1
        a["total_us"] += (e - s) / 1e3
    return {"device": dev, "start_us": t0 / 1e3, "wall_us": dev["window_us"] if dev else 0.0,
            "top_kernels": sorted(agg.values(), key=lambda a: -a["total_us"])[:top_n]}


# -- raw captures ------------------------------------------------------------------------------

PARSE_SNIPPET = (
    "import sys\n"
    "from torch_npu.profiler.profiler import analyse\n"
    "analyse(sys.argv[1], max_process_number=int(sys.argv[2]), export_type=sys.argv[3])\n"
)


def npu_parser_available(python: str = sys.executable, timeout: float = 120.0) -> tuple[bool, str]:
    """Whether torch_npu (with CANN) imports in a child process; (ok, reason)."""
    env = dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    try:
        p = subprocess.run([python, "-c", "import torch_npu; from torch_npu.profiler.profiler import analyse"],
                           env=env, capture_output=True, text=True, timeout=timeout)
    except Exception as exc:  # noqa: BLE001 - any failure means "not available"
        return False, f"{type(exc).__name__}: {exc}"
    if p.returncode == 0:
        return True, ""
    last = (p.stderr.strip().splitlines() or ["import failed"])[-1]
    return False, last[:300]


def parse_raw(capture: Path, max_process_number: int, export_type: str, python: str = sys.executable,
              timeout: float = 3600.0) -> tuple[bool, str]:
    """Run torch_npu's offline parser on one raw capture in a child process; (ok, message)."""
    env = dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    try:
        p = subprocess.run([python, "-c", PARSE_SNIPPET, str(capture), str(max(1, max_process_number)), export_type],
                           env=env, capture_output=True, text=True, timeout=timeout)
    except Exception as exc:  # noqa: BLE001
        return False, f"torch_npu offline parse failed: {type(exc).__name__}: {exc}"
    if p.returncode != 0:
        tail = (p.stderr.strip().splitlines() or ["(no output)"])[-1]
        return False, f"torch_npu offline parse exited {p.returncode}: {tail[:300]}"
    return True, ""
