"""One Ascend capture, analysed from whatever files it has: the text export, the db export, or a
part of them (step_trace_time.csv and communication.json alone, as msprof-analyze users often
keep). Which file answers which question, and in which order, is in docs/analysis.md ("Ascend
captures"); what a capture cannot answer is listed in its `missing` field.

- events (host ops, host steps, device tasks, collective ops): trace_view.json, else the db
  export read into the same shape (parsing/ascend_db.py): one analysis for both;
- the per-step breakdown (msprof-analyze's definition, analyzers/step_breakdown.py):
  step_trace_time.csv, else analysis.db's StepTraceTime (torch_npu's own numbers), else computed
  from the events (torch_npu's Overlap Analysis lanes where present, else the device tasks), else
  from kernel_details.csv;
- kernels: kernel_details.csv (op type, accelerator core), else the db's compute tasks and ops;
- collectives' wait / transit time: communication.json; links: communication_matrix.json; per op
  (`communication_ops`, for the stragglers across ranks): those rows and the db export's COMMUNICATION_OP;
- memory: memory_record.csv, else the db's MEMORY_RECORD;
- rank and parallel layout: our metadata or the directory name, else profiler_info_<N>.json /
  profiler_metadata.json, else the db's RANK_DEVICE_MAP; the device id beside it.
"""
from __future__ import annotations

import csv
from dataclasses import dataclass, field, replace
import sqlite3
from pathlib import Path

import numpy as np

from mindspeed_profiler.core import formats

from ..analyzers import ascend_free as af
from ..analyzers import step_breakdown as sb
from ..analyzers.classify import classified
from ..analyzers.collectives import collective_summary, link_summary
from ..analyzers.communication import (COMMUNICATION, collective_call, communication_summary, device_communication,
                                      is_comm_kind)
from ..analyzers.kernels import detail_kernels, kernel_class, kernel_totals, kernel_types
from ..analyzers.links import capture_matrix
from ..analyzers.memory import npu_memory_summary
from ..analyzers.memory_peaks import ascend_memory
from ..analyzers.stragglers import ascend_ops_block
from ..analyzers.trace_summary import collective_calls, summarise_classified
from ..parsing.ascend_comm import (collective_rows, collective_rows_from_db, comm_ops_from_profiler_db, link_rows,
                                   link_rows_from_db, load_json)
from ..parsing.ascend_db import read_analysis_db, read_profiler_db
from ..parsing.ascend_files import (STEP_TRACE_DB_COLUMNS, read_kernel_details, read_memory_record,
                                    read_step_trace_time, step_label, step_trace_rows)
from ..parsing import ascend_free_db as fdb
from ..parsing.ascend_identity import read_identity
from ..parsing.kineto_trace import event_columns, read_kineto_trace
from ..parsing.numbers import bad_cells

CONSISTENCY_REL = 0.01     # step rows of two sources further apart than this: a warning
STEP_RATIO_WARN = 2.0      # a step's duration in two sources more than 2x apart: a warning


@dataclass
class AscendFiles:
    """The analysable files of one capture (None: absent)."""

    capture_dir: Path                  # where profiler_info_<N>.json / profiler_metadata.json lie
    trace_view: Path | None = None
    kernel_details: Path | None = None
    step_trace: Path | None = None
    communication: Path | None = None
    matrix: Path | None = None
    memory_record: Path | None = None
    db: Path | None = None
    analysis_db: Path | None = None
    other: list[Path] = field(default_factory=list)

    @classmethod
    def of(cls, capture_dir: Path, paths: list[Path]) -> "AscendFiles":
        by_name = {p.name: p for p in paths}
        dbs = sorted(p for p in paths if p.name.endswith(".db") and p.name != formats.ASCEND_ANALYSIS_DB)
        return cls(capture_dir=capture_dir, trace_view=by_name.get(formats.ASCEND_TRACE_VIEW),
                   kernel_details=by_name.get(formats.ASCEND_KERNEL_DETAILS), step_trace=by_name.get(formats.ASCEND_STEP_TRACE),
                   communication=by_name.get(formats.ASCEND_COMMUNICATION), matrix=by_name.get(formats.ASCEND_COMMUNICATION_MATRIX),
                   memory_record=by_name.get(formats.ASCEND_MEMORY_RECORD), db=dbs[0] if dbs else None,
                   analysis_db=by_name.get(formats.ASCEND_ANALYSIS_DB))


def hccl_rows(kd) -> np.ndarray:
    """kernel_details.csv's communication rows: accelerator core HCCL, or a collective's task type."""
    return np.array([is_comm_kind(t, c) for t, c in zip(kd.types, kd.cores)], dtype=bool)


def kernel_rows(kd) -> list[dict]:
    """kernel_details.csv's rows (or the db's) by name: the HCCL rows are communication, every
    other row a compute task, as msprof's Computing counts it (MemSet kernels included)."""
    classes = [kernel_class(c, False) for c in hccl_rows(kd)]
    return detail_kernels(kd.names, kd.types, kd.cores, kd.dur, classes)


def kernel_fields(kd, rows: list[dict], top_n: int) -> dict:
    return {"top_kernels": rows[:top_n], "kernel_totals": kernel_totals(rows), "kernel_types": kernel_types(kd.types, kd.dur, top_n),
            "n_kernels": len(kd.names), "n_bad_kernels": kd.n_bad}


def analyse_ascend(files: AscendFiles, rank_known: int | None, top_n: int, want_events: bool) -> tuple[dict, dict | None]:
    out: dict = {}
    warnings: list[str] = []
    events = None
    ident = read_identity(files.capture_dir)
    warnings += ident.warnings
    kd_text = _read_or_absent(files, "kernel_details", read_kernel_details, warnings)
    own_text = _read_or_absent(files, "step_trace", read_step_trace_time, warnings)
    files = replace(files, kernel_details=files.kernel_details if kd_text else None,
                    step_trace=files.step_trace if own_text else None)
    ct, pdb, events_src = None, None, None
    if files.trace_view:
        ev = read_kineto_trace(files.trace_view).events
        events_src = files.trace_view.name
    elif files.db:
        pdb = read_profiler_db(files.db)
        ev = pdb.events
        events_src = files.db.name
        warnings += pdb.warnings
    if events_src:
        ct = classified(ev)
        out = summarise_classified(ct, top_n)
        warnings += out.pop("warnings", [])
        events = event_columns(ev) if want_events else None
    kd = kd_text or (pdb.kernels if pdb else None)
    krows = kernel_rows(kd) if kd is not None else []
    if kd is not None:
        out.update(kernel_fields(kd, krows, top_n))
        if kd.n_bad:
            warnings.append(f"{files.kernel_details.name}: {kd.n_bad} row(s) without a usable start time or duration were left out")
            warnings += bad_cells(files.kernel_details.name, kd.bad, allowed="a finite number, a duration not negative",
                                  what="the rows above")
        if files.kernel_details and files.trace_view and out.get("start_us") is not None:
            warnings += _same_recording(out, kd)
    adb = _analysis_db(files, warnings)
    rows, source = _breakdown(files, ct, kd, own_text, adb, warnings)
    if rows:
        out["step_trace"], out["step_trace_source"] = rows, source
    out["steps"] = _steps(out.get("steps") or [], rows, kd, events_src, source, warnings)
    if rows:
        out["device"] = sb.device_totals(rows, int(ct.m["device"].sum()) if ct is not None else (len(kd.names) if kd else None))
    out.setdefault("device", None)
    if out.get("wall_us") is None:
        out["wall_us"] = float(sum(r["dur_us"] for r in rows)) if rows else 0.0
        out["start_us"] = float(kd.base + kd.ts.min()) if kd is not None and len(kd.ts) else None
    crows, crows_src = _collective_rows(files, adb, warnings)
    out["communication"] = _communication(files, adb, crows, out, krows, top_n, warnings)
    ops = _communication_ops(files, crows, crows_src, warnings)
    if ops:   # per op and rank, for the stragglers across ranks (analyzers/stragglers.py)
        out["communication_ops"] = ops
    free = capture_free(files.db) if files.db else None   # the free intervals by cause (msprof-analyze's free_analysis)
    if free is not None:
        out["ascend_free"] = free
        warnings += free["warnings"]
    memory = _memory(files, pdb, warnings)
    if memory:
        out["memory"] = memory
    records = ascend_memory(files.capture_dir)   # peaks per device and component, the ops allocating most
    if records["devices"] or records["ops"]:
        out["memory_records"] = records
        warnings += records["warnings"]
    out.update(_identity(ident, pdb, rows, rank_known, warnings))
    out["missing"] = _missing(files, events_src, kd, rows, out)
    out["warnings"] = warnings
    if not events_src and kd is None and not rows and not out["communication"] and not memory:
        raise ValueError("no readable Ascend output files")
    return out, events


def _same_recording(out: dict, kd) -> list[str]:
    """trace_view.json and kernel_details.csv of one capture must describe one recording: report
    (never merge silently) files whose time ranges do not overlap."""
    tv_lo = out["start_us"]
    tv_hi = tv_lo + (out.get("wall_us") or 0)
    kd_lo, kd_hi = kd.base + float(kd.ts.min()), kd.base + float((kd.ts + kd.dur).max())
    if kd_hi < tv_lo or kd_lo > tv_hi:
        return [f"{formats.ASCEND_TRACE_VIEW} ({tv_lo:.0f}-{tv_hi:.0f} us) and {formats.ASCEND_KERNEL_DETAILS} "
                f"({kd_lo:.0f}-{kd_hi:.0f} us) cover time ranges that do not overlap: they come from different "
                "recordings (files of another run copied in?); the figures mix both"]
    return []


def _analysis_db(files: AscendFiles, warnings: list[str]) -> dict:
    """torch_npu's analysis.db tables ({} without the file; a damaged one is a warning)."""
    if not files.analysis_db:
        return {}
    try:
        return read_analysis_db(files.analysis_db)
    except sqlite3.Error as exc:
        warnings.append(f"{files.analysis_db.name}: unreadable ({type(exc).__name__}: {exc})")
        return {}


def _read_or_absent(files: AscendFiles, name: str, reader, warnings: list[str]):
    """What `reader` reads of the file `name` of `files`: None when it is absent, and None with a
    warning when it is unreadable or has no data rows (a header alone): the capture then takes
    what the other files give, as without the file."""
    path = getattr(files, name)
    if path is None:
        return None
    try:
        return reader(path)
    except (OSError, ValueError, csv.Error, UnicodeDecodeError) as exc:
        warnings.append(f"{path.name}: unreadable ({type(exc).__name__}: {exc}): analysed as if absent")
        return None


def _breakdown(files: AscendFiles, ct, kd, own_text: list[dict] | None, adb: dict,
               warnings: list[str]) -> tuple[list[dict], str | None]:
    """The per-step rows and where they come from (module doc: the order)."""
    computed, computed_src = None, None
    if ct is not None:
        windows = sb.device_windows(ct)
        if windows:
            where = files.trace_view.name if files.trace_view else files.db.name
            if sb.has_lanes(ct):
                computed, computed_src = sb.from_lanes(ct, windows), f"{where}: Overlap Analysis"
            else:
                computed, computed_src = sb.from_tasks(ct, windows), f"{where}: device tasks"
            copies = sb.exposed_copies_by_step(ct, windows)
            for r in computed:
                r.setdefault("memcpy_exposed_us", copies.get(r["step"]))
    own, own_src = None, None
    if own_text:
        own, own_src = own_text, files.step_trace.name
    elif adb.get("StepTraceTime"):
        own = step_trace_rows(adb["StepTraceTime"], STEP_TRACE_DB_COLUMNS)
        own_src = f"{files.analysis_db.name}: StepTraceTime"
    if own:
        by_step = {r["step"]: r for r in computed or []}
        for r in own:
            c = by_step.get(r["step"])
            if c is not None and c.get("memcpy_exposed_us") is not None:
                r["memcpy_exposed_us"] = c["memcpy_exposed_us"]
            sb.finish_row(r)
        if computed:
            warnings += _disagreement(own, own_src, computed, computed_src)
        return own, own_src
    if computed:
        return computed, computed_src
    if kd is not None:
        rows = sb.from_kernel_rows(kd.step_ids, kd.ts, kd.dur, hccl_rows(kd))
        return rows, f"{(files.kernel_details or files.db).name}: kernel rows"
    return [], None


def _disagreement(own: list[dict], own_src: str, computed: list[dict], computed_src: str) -> list[str]:
    """torch_npu's own rows and the rows computed from the events should agree: say so when they
    do not (files of two recordings, or a definition we do not reproduce)."""
    out = []
    by_step = {r["step"]: r for r in computed}
    for r in own:
        c = by_step.get(r["step"])
        if c is None:
            continue
        for k in ("computing_us", "communication_us"):
            a, b = r.get(k), c.get(k)
            if a and b is not None and abs(a - b) > CONSISTENCY_REL * max(a, b):
                out.append(f"step {r['step']}: {k} is {a:.1f} us in {own_src} but {b:.1f} us from {computed_src} "
                           f"(more than {CONSISTENCY_REL:.0%} apart: two recordings in one capture?); {own_src} is used")
    return out


def _steps(host: list[dict], rows: list[dict], kd, events_src, rows_src, warnings: list[str]) -> list[dict]:
    """The capture's steps: the host ProfilerStep#N ranges when there are events, else the
    breakdown's rows; each with the device busy time of its breakdown row. Sources that disagree
    (other step numbers, durations more than 2x apart) are reported."""
    by_step = {r["step"]: r for r in rows}
    if host:
        for s in host:
            r = by_step.get(s["step"])
            if r is not None:
                s["device_busy_us"] = r["device_busy_us"]
        if rows and not {s["step"] for s in host} & set(by_step):
            warnings.append(f"{events_src} has steps {sorted(str(s['step']) for s in host)} and {rows_src} steps "
                            f"{sorted(str(k) for k in by_step)}: no step in common (different recordings?)")
        steps = host
    else:
        steps = [{"step": r["step"], "dur_us": r["dur_us"], "device_busy_us": r["device_busy_us"]} for r in rows]
    if kd is not None and any(kd.step_ids) and rows_src and "kernel rows" not in rows_src:
        ids = {step_label(s) for s in kd.step_ids} - {None}
        spans = {}
        for sid, t, d in zip(kd.step_ids, kd.ts, kd.dur):
            k = step_label(sid)
            if k is not None:
                lo, hi = spans.get(k, (t, t + d))
                spans[k] = (min(lo, t), max(hi, t + d))
        if by_step and not ids & set(by_step):
            warnings.append(f"{formats.ASCEND_KERNEL_DETAILS} has steps {sorted(map(str, ids))} and {rows_src} steps "
                            f"{sorted(str(k) for k in by_step)}: no step in common (different recordings?)")
        for k, (lo, hi) in spans.items():
            r = by_step.get(k)
            if r and r["dur_us"] > 0 and hi > lo:
                ratio = max(r["dur_us"], hi - lo) / min(r["dur_us"], hi - lo)
                if ratio > STEP_RATIO_WARN:
                    warnings.append(f"step {k}: {rows_src} gives {r['dur_us']:.0f} us, the kernels of "
                                    f"{formats.ASCEND_KERNEL_DETAILS} span {hi - lo:.0f} us ({ratio:.1f}x apart); "
                                    f"the steps come from {rows_src}")
    return steps


def _collective_rows(files: AscendFiles, adb: dict, warnings: list[str]) -> tuple[list[dict] | None, str | None]:
    """The collectives' per-op rows (wait / transit...): communication.json, else analysis.db's
    CommAnalyzerTime; (None, None) without either (an unreadable file is a warning)."""
    if files.communication:
        try:
            return collective_rows(load_json(files.communication)), files.communication.name
        except (OSError, ValueError) as exc:
            warnings.append(f"{files.communication.name}: unreadable ({type(exc).__name__}: {exc})")
            return None, None
    if adb.get("CommAnalyzerTime"):
        return collective_rows_from_db(adb["CommAnalyzerTime"]), f"{files.analysis_db.name}: CommAnalyzerTime"
    return None, None


def _communication_ops(files: AscendFiles, crows: list[dict] | None, crows_src: str | None,
                       warnings: list[str]) -> dict | None:
    """`communication_ops`: the collectives' rows, and the db export's COMMUNICATION_OP as
    msprof-analyze's slow_rank reads it (also the ops, without wait times, where nothing else has them)."""
    vote, vote_src = [], None
    if files.db:
        try:
            vote, vote_src = comm_ops_from_profiler_db(files.db), f"{files.db.name}: COMMUNICATION_OP"
        except sqlite3.Error as exc:
            warnings.append(f"{files.db.name}: COMMUNICATION_OP unreadable ({type(exc).__name__}: {exc})")
    if not crows and vote:
        crows, crows_src = [{"step": None, "type": None, "group": r["group"], "op": r["op"], "start_us": r["start_ns"] / 1e3,
                             "elapse_us": r["elapse_us"], "wait_us": None, "transit_us": None, "sync_us": None}
                            for r in vote], vote_src
    return ascend_ops_block(crows or [], crows_src or "", vote, vote_src)


def _communication(files: AscendFiles, adb: dict, crows: list[dict] | None, out: dict, krows: list[dict],
                   top_n: int, warnings: list[str]) -> dict | None:
    """Device part (from the breakdown), host part (collective calls on the host, from the events),
    the collectives by time (the ops of the events, else kernel_details' HCCL rows, else
    communication.json's ops), `collectives` (communication.json, else analysis.db's
    CommAnalyzerTime: wait / transit per op) and `links` (communication_matrix.json, else
    CommAnalyzerMatrix: per transport; `communication_matrix`: its rows per group and op)."""
    prev = out.get("communication") or {}
    calls = [c for c in prev.get("top") or [] if c.get("where") == "device"] or collective_calls(krows)
    host_calls = [c for c in prev.get("top") or [] if c.get("where") == "host"]
    collectives = links = None
    if crows is not None:
        collectives = collective_summary(crows, top_n)
    if not calls and collectives:
        calls = [collective_call(o["name"], "device", o["count"], o["elapse_us"]) for o in collectives["top"]]
    lrows = None
    if files.matrix:
        try:
            lrows = link_rows(load_json(files.matrix))
        except (OSError, ValueError) as exc:
            warnings.append(f"{files.matrix.name}: unreadable ({type(exc).__name__}: {exc})")
    elif adb.get("CommAnalyzerMatrix"):
        lrows = link_rows_from_db(adb["CommAnalyzerMatrix"])
    links = link_summary(lrows) if lrows else None
    summary = communication_summary(device_communication(out.get("device")), prev.get("host"), calls + host_calls, top_n)
    if summary is None and (collectives or links):
        summary = COMMUNICATION.row(device=None, host=None, top=sorted(calls, key=lambda r: -r["total_us"])[:top_n])
    if summary is not None:
        summary["collectives"] = collectives
        summary["links"] = links
        if lrows:   # the links per group and op, joined over the ranks by analyzers/links.py
            summary["communication_matrix"] = capture_matrix(lrows)
    return summary


def _memory(files: AscendFiles, pdb, warnings: list[str]) -> dict | None:
    records, source = None, None
    got = _read_or_absent(files, "memory_record", read_memory_record, warnings)
    if got is not None:
        (records, bad), source = got, files.memory_record.name
        warnings += bad
    elif pdb is not None and pdb.memory:
        records, source = pdb.memory, f"{files.db.name}: MEMORY_RECORD"
    if not records:
        return None
    return {"npu": npu_memory_summary(records), "npu_source": source}


def _identity(ident, pdb, rows: list[dict], rank_known: int | None, warnings: list[str]) -> dict:
    """rank (when the capture's name / our metadata did not say), device_id, world_size, parallel
    and the `ascend` block (level, export type, NPU, versions, the files read)."""
    out: dict = {}
    rank = ident.rank if ident.rank is not None else (pdb.rank if pdb else None)
    if rank_known is None and rank is not None:
        out["rank"] = rank
    elif rank_known is not None and rank is not None and rank != rank_known:
        warnings.append(f"the capture's name / metadata says rank {rank_known}, torch_npu's files say {rank}: "
                        f"rank {rank_known} kept")
    device = next((r["device_id"] for r in rows if r.get("device_id") is not None), None)
    if device is None and pdb is not None:
        device = pdb.device_id
    out["device_id"] = device
    out["world_size"] = ident.world_size
    out["parallel"] = ident.parallel
    out["ascend"] = {"level": ident.level, "export_type": ident.export_type, "npu": pdb.npu if pdb else None,
                     **ident.versions, "identity_files": ident.sources, "parallel_groups": ident.groups or None}
    return out


def _missing(files: AscendFiles, events_src, kd, rows: list[dict], out: dict) -> list[str]:
    """What this capture cannot answer, and which file would have told it."""
    miss = []
    if not events_src:
        miss.append(f"host ops, host steps and the device timeline (no {formats.ASCEND_TRACE_VIEW} or "
                    f"{formats.ASCEND_DB_GLOB})")
    if kd is None and not events_src:
        miss.append(f"kernels (no {formats.ASCEND_KERNEL_DETAILS}, {formats.ASCEND_TRACE_VIEW} or db export)")
    if not rows:
        miss.append(f"the per-step breakdown (no {formats.ASCEND_STEP_TRACE}, {formats.ASCEND_ANALYSIS_DB}, "
                    f"{formats.ASCEND_TRACE_VIEW}, db export or {formats.ASCEND_KERNEL_DETAILS})")
    comm = (out.get("device") or {}).get("communication_us")
    if comm and not (out.get("communication") or {}).get("collectives"):
        miss.append(f"the collectives' wait / transit times (no {formats.ASCEND_COMMUNICATION} or "
                    f"{formats.ASCEND_ANALYSIS_DB} CommAnalyzerTime)")
    if out.get("rank") is None and not out.get("ascend", {}).get("identity_files"):
        miss.append("the rank (no profiler_info_<N>.json, profiler_metadata.json or RANK_DEVICE_MAP)")
    return miss


def capture_free(db_path: Path, top_n: int = af.DEFAULT_TOP_N, msprof_float: bool = True) -> dict | None:
    """The block stored as captures[*].ascend_free for a torch_npu db (ascend_pytorch_profiler_*.db):
    {"rows": [ASCEND_FREE rows, longest first], "top_n", "n_busy", "n_free" (all gaps), "free_us"
    (their sum), "window_us" (first busy start to last busy end), "source", "warnings"}.
    None where the db holds no device tasks (no TASK / COMPUTE_TASK_INFO table); an unreadable db or
    a missing link table is a warning in the block (no rows, as the recipe writes none), never an
    exception. msprof_float: see normalise_links (True: the recipe's numbers to the digit)."""
    path = Path(db_path)
    block = {"rows": [], "top_n": top_n, "n_busy": 0, "n_free": 0, "free_us": None, "window_us": None,
             "source": f"{path.name}: {fdb.SOURCE}", "warnings": []}
    try:
        tables = fdb.db_tables(path)
    except OSError as e:
        block["warnings"].append(str(e))
        return block
    if not {"TASK", "COMPUTE_TASK_INFO"} <= tables:
        return None
    try:
        busy, warnings = fdb.read_busy_intervals(path)
        block["warnings"] += warnings
        links = fdb.read_task_links(path)
    except (OSError, ValueError) as e:
        block["warnings"].append(str(e))
        return block
    block["rows"], totals = af.free_rows(busy, links, top_n, msprof_float)
    block.update(totals)
    n_zeroed = sum(1 for r in block["rows"] if r["zeroed_links"])
    if n_zeroed:
        block["warnings"].append(f"{n_zeroed} free interval(s) were classified with NULL CANN / PyTorch times read "
                                 "as 0, as msprof-analyze does: their idle times and reasons are not meaningful")
    return block
