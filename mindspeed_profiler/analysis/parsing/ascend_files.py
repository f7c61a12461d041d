"""torch_npu's parsed text output (ASCEND_PROFILER_OUTPUT's CSV files), read into plain tables
(the db export: ascend_db.py). Quirks are real and handled: values padded with a tab, empty or "N/A" cells,
a UTF-8 BOM, timestamps with more digits than a float64 keeps."""
from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .numbers import INT64, MAX_TEXT, bad_cells, integer, note_bad, real


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
    """A cell's finite number; NaN (the tables' "no value") for an empty, junk, inf or nan cell."""
    try:
        x = real(v)
    except ValueError:
        return float("nan")
    return float("nan") if x is None else x


def exact_us(v: str) -> tuple[int, float]:
    """'1736413971558972.912' -> (1736413971558972, 0.912) without float64 rounding; ValueError
    unless ASCII digits (the whole within int64)."""
    t = clean(v)
    whole, _, frac = t.partition(".")
    w = integer(whole)
    if w is None or len(t) > MAX_TEXT or (frac and not (frac.isascii() and frac.isdigit())):
        raise ValueError(f"{t[:40]!r}: not a time in microseconds")
    return w, float("0." + frac) if frac else 0.0


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
    bad: dict = field(default_factory=dict)   # their bad cells by column (numbers.note_bad)


def read_kernel_details(path: Path) -> KernelDetails:
    rows = read_csv(path)
    missing = [c for c in ("Name", "Start Time(us)", "Duration(us)") if c not in rows[0]]
    if missing:
        raise ValueError(f"{path.name}: missing column(s) {missing}; found {list(rows[0])[:12]}")

    bad: dict = {}

    def start(r):
        try:
            return exact_us(r["Start Time(us)"])
        except (TypeError, ValueError, AttributeError):
            note_bad(bad, "Start Time(us)", r["Start Time(us)"])
            return None

    def usable(p, r) -> bool:
        if p is None:
            return False
        if fnum(r["Duration(us)"]) >= 0:   # NaN (junk, inf, empty) is not
            return True
        note_bad(bad, "Duration(us)", r["Duration(us)"])
        return False
    parts = [start(r) for r in rows]
    good = [usable(p, r) for p, r in zip(parts, rows)]
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
        base=base, n_bad=n_bad, bad=bad)


# step_trace_time.csv / msprof-analyze's cluster_step_trace_time.csv column -> field (us)
STEP_TRACE_COLUMNS = {"Computing": "computing_us", "Communication(Not Overlapped)": "communication_exposed_us",
                      "Overlapped": "overlapped_us", "Communication": "communication_us", "Free": "free_us",
                      "Stage": "stage_us", "Bubble": "bubble_us",
                      "Communication(Not Overlapped and Exclude Receive)": "communication_exposed_exclude_receive_us",
                      "Preparing": "preparing_us"}
# the same fields in analysis.db's StepTraceTime and cluster_analysis.db's ClusterStepTraceTime
STEP_TRACE_DB_COLUMNS = {"computing": "computing_us", "communication_not_overlapped": "communication_exposed_us",
                         "overlapped": "overlapped_us", "communication": "communication_us", "free": "free_us",
                         "stage": "stage_us", "bubble": "bubble_us",
                         "communication_not_overlapped_and_exclude_receive": "communication_exposed_exclude_receive_us",
                         "preparing": "preparing_us"}
# the per-rank parallel indices msprof-analyze adds to its cluster rows
CLUSTER_INDEX_COLUMNS = {"DP Index": "dp_index", "PP Index": "pp_index", "TP Index": "tp_index",
                         "dp_index": "dp_index", "pp_index": "pp_index", "tp_index": "tp_index"}


def step_label(v) -> int | str | None:
    """One type for step labels everywhere: an integer when the text is one ("50" -> 50), None for
    an empty label, else the text."""
    if v is None or isinstance(v, bool):
        return None
    if isinstance(v, (int, np.integer)):
        return int(v)
    if isinstance(v, float) and v.is_integer():
        return int(v)
    t = str(v).strip()
    if not t or t.upper() in ("NONE", "NULL", "NAN"):
        return None
    return int(t) if t.isascii() and t.isdigit() and len(t) <= 15 else t


def _int_or_none(v) -> int | None:
    x = fnum(v)
    return int(x) if x == x and x.is_integer() and abs(x) < 2**31 else None


def step_trace_rows(records: list[dict], columns: dict[str, str]) -> list[dict]:
    """Rows of a step trace table (file or db) as {step, <fields in us>, device_id, type, index,
    dp/pp/tp index}: only the columns present."""
    out = []
    for r in records:
        row = {"step": step_label(clean(r.get("Step", r.get("step"))))}
        for col, key in columns.items():
            if col in r:
                row[key] = fnum(r[col])
        dev = r.get("Device_id", r.get("deviceId"))
        if dev is not None:
            row["device_id"] = _int_or_none(dev)
        if "Type" in r or "type" in r:
            row["type"], row["index"] = clean(r.get("Type", r.get("type"))), clean(r.get("Index", r.get("index")))
        for col, key in CLUSTER_INDEX_COLUMNS.items():
            if col in r:
                row[key] = _int_or_none(r[col])
        out.append(row)
    return out


def read_step_trace_time(path: Path) -> list[dict]:
    """step_trace_time.csv (one capture) or msprof-analyze's cluster_step_trace_time.csv."""
    return step_trace_rows(read_csv(path), STEP_TRACE_COLUMNS)


_MB = 1 << 20


def read_memory_record(path: Path) -> tuple[list[dict], list[str]]:
    """memory_record.csv: ([{component (PTA, GE, PTA+GE, APP), ts_us, allocated_bytes, reserved_bytes,
    active_bytes}], warnings) (the file's MB as bytes; an empty cell is None, so is a bad one, and
    the warnings name its column and value)."""
    bad: dict = {}

    def cell(r: dict, col: str) -> float | None:
        try:
            return real(r.get(col))
        except ValueError:
            note_bad(bad, col, r.get(col))
            return None

    def mb(r: dict, col: str) -> int | None:
        x = cell(r, col)
        if x is not None and abs(x) * _MB >= INT64:   # bytes beyond int64: no memory, a bad cell
            note_bad(bad, col, r.get(col))
            return None
        return None if x is None else int(round(x * _MB))
    rows = [{"component": r.get("Component", ""), "ts_us": fnum(cell(r, "Timestamp(us)")),
             "allocated_bytes": mb(r, "Total Allocated(MB)"), "reserved_bytes": mb(r, "Total Reserved(MB)"),
             "active_bytes": mb(r, "Total Active(MB)")} for r in read_csv(path)]
    return rows, bad_cells(path.name, bad, what="read as empty")
