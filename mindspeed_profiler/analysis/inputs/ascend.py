"""Ascend captures: `ascend` = torch_npu's parsed output (ASCEND_PROFILER_OUTPUT text files or the
db export) in a *_ascend_pt/ directory or loose; `ascend_raw` = a *_ascend_pt/ directory not parsed
yet, parsed here with torch_npu's offline parser where torch_npu + CANN work (prepare)."""
from __future__ import annotations

import os
import pickle
import sys
from pathlib import Path
from typing import Callable

import numpy as np

from mindspeed_profiler import formats

from ..analyzers.breakdown import device_breakdown
from ..analyzers.classify import MEMCPY_RE
from ..analyzers.communication import communication_summary, device_communication, is_comm_kind
from ..analyzers.memory import memory_summary
from ..analyzers.kernels import db_kernels, detail_kernels, kernel_class, kernel_totals, kernel_types
from ..analyzers.steps import steps_from_kernels, steps_from_step_trace
from ..discover import Capture, read_identity, rel
from ..parsing import ascend_raw
from ..parsing.memory_snapshot import read_memory_snapshot
from ..parsing.ascend_files import read_kernel_details, read_profiler_db, read_step_trace_time
from . import InputKind, register_input
from .kineto import analyse_trace_file


def _output_files(out: Path) -> list[Path]:
    """The parsed files the analysis reads: the text files, else the db export."""
    text = [out / n for n in formats.ASCEND_TEXT_FILES if (out / n).is_file()]
    dbs = sorted(out.glob(formats.ASCEND_DB_GLOB)) if out.is_dir() else []
    return text or dbs


def _claim_capture_dir(root: Path, d: Path) -> Capture | None:
    if formats.capture_format_of_dir(d.name) != "ascend":
        return None
    cap = Capture(path=rel(root, d), kind="ascend")
    read_identity(cap, root, d)
    files = _output_files(d / formats.ASCEND_OUTPUT_DIR)
    if files:
        cap.files = [rel(root, p) for p in files] + [rel(root, p) for p in sorted(d.glob("*" + formats.MEMORY_SNAPSHOT_SUFFIX))]
    else:
        cap.kind = "ascend_raw"
    return cap


def _claim_loose_output(root: Path, d: Path, names: list[str], claimed: set[str]) -> list[Capture]:
    """A loose ASCEND_PROFILER_OUTPUT (or a copy of its files)."""
    text = [n for n in formats.ASCEND_TEXT_FILES if n in names and os.path.isfile(d / n)]
    if not text:
        return []
    cap = Capture(path=rel(root, d), kind="ascend", files=[rel(root, d / n) for n in text])
    if d.name == formats.ASCEND_OUTPUT_DIR:
        cap.stage = None
    claimed.update(text)
    claimed.update(n for n in names if n in formats.ASCEND_SIDE_FILES)
    return [cap]


def kernel_details_summary(path: Path, top_n: int) -> dict:
    """Top kernels, kernel types, the device breakdown and the steps (by Step Id) of kernel_details.csv."""
    kd = read_kernel_details(path)
    comm = np.array([is_comm_kind(t, c) for t, c in zip(kd.types, kd.cores)])
    # copies: SDMA tasks, MEMCPY / MEMSET task types or names (never a vector op that only looks alike)
    mem = np.array([bool(MEMCPY_RE.search(f"{t} {c}")) or n.upper().startswith(("MEMCPY", "MEMSET"))
                    for t, c, n in zip(kd.types, kd.cores, kd.names)]) & ~comm
    dev = device_breakdown(kd.ts, kd.ts + kd.dur, ~comm & ~mem, comm, mem)
    classes = [kernel_class(c, m) for c, m in zip(comm, mem)]
    rows = detail_kernels(kd.names, kd.types, kd.cores, kd.dur, classes)
    warnings = []
    if kd.n_bad:
        warnings.append(f"{path.name}: {kd.n_bad} row(s) without a usable start time or duration were left out")
    return {
        "device": dev, "start_us": kd.base + float(kd.ts.min()), "end_us": kd.base + float((kd.ts + kd.dur).max()),
        "top_kernels": rows[:top_n], "kernel_totals": kernel_totals(rows),
        "kernel_types": kernel_types(kd.types, kd.dur, top_n),
        "n_kernels": len(kd.names), "n_bad_kernels": kd.n_bad, "kernel_steps": sorted(set(kd.step_ids) - {""}),
        "steps": steps_from_kernels(kd.step_ids, kd.ts, kd.dur, kd.base), "warnings": warnings,
    }


def db_summary(path: Path, top_n: int) -> dict:
    """Device breakdown and top kernels from torch_npu's db export."""
    db = read_profiler_db(path)
    task, comm = db.tasks, db.comm
    # only named compute tasks count as compute (TASK also holds the HCCL tasks and sync events)
    named = np.array([int(g) in db.task_names for g in task[:, 2]], dtype=bool)
    t0 = float(min(task[:, 0].min() if len(task) else np.inf, comm[:, 0].min() if len(comm) else np.inf))
    ts = np.r_[task[named, 0], comm[:, 0]]
    end = np.r_[task[named, 1], comm[:, 1]]
    ts, end = (ts - t0) / 1e3, (end - t0) / 1e3
    is_comm = np.r_[np.zeros(named.sum(), bool), np.ones(len(comm), bool)]
    dev = device_breakdown(ts, end, ~is_comm, is_comm, np.zeros(len(ts), bool))
    rows = db_kernels(task[named], db.task_names)
    return {"device": dev, "start_us": t0 / 1e3, "wall_us": dev["window_us"] if dev else 0.0,
            "top_kernels": rows[:top_n], "kernel_totals": kernel_totals(rows)}


def _same_run_warnings(out: dict, kd: dict) -> list[str]:
    """trace_view.json and kernel_details.csv of one capture must describe one recording: report
    (never merge silently) files whose time ranges do not overlap or whose steps differ."""
    warnings = []
    tv_lo, tv_hi = out.get("start_us"), (out.get("start_us") or 0) + (out.get("wall_us") or 0)
    if tv_lo is not None and (kd["end_us"] < tv_lo or kd["start_us"] > tv_hi):
        warnings.append(f"{formats.ASCEND_TRACE_VIEW} ({tv_lo:.0f}-{tv_hi:.0f} us) and {formats.ASCEND_KERNEL_DETAILS} "
                        f"({kd['start_us']:.0f}-{kd['end_us']:.0f} us) cover time ranges that do not overlap: they come "
                        "from different recordings (files of another run copied in?); the figures mix both")
    tv_steps = {str(s["step"]) for s in out.get("steps") or []}
    kd_steps = set(kd["kernel_steps"])
    if tv_steps and kd_steps and not tv_steps & kd_steps:
        warnings.append(f"{formats.ASCEND_TRACE_VIEW} has steps {sorted(tv_steps)} and {formats.ASCEND_KERNEL_DETAILS} "
                        f"steps {sorted(kd_steps)}: no step in common, different recordings")
    return warnings


def analyse(root: Path, cap: Capture, top_n: int, want_events: bool) -> tuple[dict, dict | None]:
    files = {Path(f).name: root / f for f in cap.files}
    out: dict = {}
    events = None
    warnings: list[str] = []
    if formats.ASCEND_TRACE_VIEW in files:
        out, events = analyse_trace_file(files[formats.ASCEND_TRACE_VIEW], top_n, want_events)
        warnings += out.pop("warnings", [])
    if formats.ASCEND_KERNEL_DETAILS in files:
        kd = kernel_details_summary(files[formats.ASCEND_KERNEL_DETAILS], top_n)
        warnings += kd["warnings"] + (_same_run_warnings(out, kd) if out else [])
        for key in ("top_kernels", "kernel_totals", "kernel_types", "n_kernels", "n_bad_kernels"):
            out[key] = kd[key]   # richer than trace_view's (type, core)
        if not out.get("device"):
            out["device"] = kd["device"]
            out.setdefault("start_us", kd["start_us"])
            out.setdefault("wall_us", kd["device"]["window_us"] if kd["device"] else 0.0)
        if not out.get("steps"):
            out["steps"] = kd["steps"]
    if formats.ASCEND_STEP_TRACE in files:
        out["step_trace"] = read_step_trace_time(files[formats.ASCEND_STEP_TRACE])
        if not out.get("steps"):
            out["steps"] = steps_from_step_trace(out["step_trace"])
    dbs = [p for n, p in files.items() if n.endswith(".db")]
    if dbs and not out:
        out = db_summary(dbs[0], top_n)
    if not out:
        raise ValueError("no readable Ascend output files")
    snapshots = [p for n, p in files.items() if n.endswith(formats.MEMORY_SNAPSHOT_SUFFIX)]
    if snapshots:
        try:
            out["memory"] = {"snapshot": rel(root, snapshots[0]),
                             "devices": memory_summary(read_memory_snapshot(snapshots[0]), top_n)}
        except (OSError, ValueError, EOFError, pickle.UnpicklingError) as exc:
            warnings.append(f"{snapshots[0].name}: memory snapshot unreadable ({type(exc).__name__}: {exc})")
    if out.get("communication") is None:
        calls = [{"name": r["name"], "where": "device", "count": r["count"], "total_us": r["total_us"]}
                 for r in out.get("top_kernels") or [] if r.get("class") == "communication"]
        out["communication"] = communication_summary(device_communication(out.get("device")), None, calls, top_n)
    out["warnings"] = warnings
    return out, events


def prepare_raw(root: Path, caps: list[Capture], jobs: int, export_type: str, log: Callable[[str], None],
                python: str = sys.executable) -> dict[str, str]:
    """Parse raw Ascend captures with torch_npu when it works here (they become `ascend`); else
    a reason per capture."""
    raw = [c for c in caps if c.kind == "ascend_raw"]
    if not raw:
        return {}
    ok, why = ascend_raw.npu_parser_available(python)
    reasons: dict[str, str] = {}
    for c in raw:
        where = root / c.path
        if not ok:
            reasons[c.path] = (f"raw Ascend capture, not parsed yet (no {formats.ASCEND_OUTPUT_DIR}): torch_npu with CANN "
                               f"is not usable here ({why}). Parse it on a machine with torch_npu + CANN: "
                               f"`mindspeed-profiler analyse {where}` (or torch_npu.profiler.profiler.analyse('{where}'))")
            continue
        log(f"parsing raw Ascend capture with torch_npu: {where}")
        done, msg = ascend_raw.parse_raw(where, jobs, export_type, python)
        files = _output_files(where / formats.ASCEND_OUTPUT_DIR)
        if done and files:
            c.kind = "ascend"
            c.files = [os.path.relpath(p, root) for p in files]
        else:
            reasons[c.path] = msg or f"torch_npu offline parse wrote no {formats.ASCEND_OUTPUT_DIR}"
    return reasons


def _analyse_raw(root: Path, cap: Capture, top_n: int, want_events: bool) -> tuple[dict, None]:
    raise ValueError(f"raw Ascend capture: not parsed (no {formats.ASCEND_OUTPUT_DIR})")


register_input(InputKind("ascend", analyse, order=10, claim_dir=_claim_capture_dir, claim_files=_claim_loose_output))
register_input(InputKind("ascend_raw", _analyse_raw, order=11, prepare=prepare_raw))
