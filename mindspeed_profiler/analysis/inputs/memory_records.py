"""Kind `memory`: the metrics tracker's memory directory (`<metrics>/memory/`, issue 47;
metrics/memory_tracking.py writes it): every worker's stage-call lines (`<role>_rank<R>.stages.jsonl`)
and every out-of-memory / host watermark record (`*.memory.json`) with the allocator's snapshot beside
it (`*.memory_snapshot.pickle`). The directory is one capture; its rows: STAGE_MEMORY (per worker and
stage), OOM_RECORDS, OOM_LIVE (analyzers/stage_memory.py, analyzers/oom.py).

Bounded and forgiving: a line that is no record is counted, a record or a snapshot that cannot be
read is a warning (the snapshot read as plain data only, parsing/memory_snapshot.py), and the rest
is analysed."""
from __future__ import annotations

import json
import os
from pathlib import Path

from mindspeed_profiler.core import formats
from mindspeed_profiler.core.fileio import read_regular_file
from mindspeed_profiler.core.jsonsafe import loads_lenient

from ..analyzers.oom import live_at_failure, python_rows, record_row
from ..analyzers.stage_memory import stage_rows
from mindspeed_profiler.analysis.pipeline.discover import Capture, rel
from . import InputKind, register_input

MAX_LINES = 2_000_000          # stage-call lines read per file (said when cut)
MAX_RECORD_BYTES = 16 << 20    # a record is a few kB; a stranger's file that size is not one
MAX_RECORDS = 10_000           # records read per directory
SHOWN = 3                      # problems quoted per file


def _claim(root: Path, d: Path) -> Capture | None:
    if d.name != formats.MEMORY_DIR:
        return None
    try:
        names = sorted(os.listdir(d))
    except OSError:
        return None
    ours = [n for n in names if (formats.MEMORY_STAGES_RE.match(n) or formats.MEMORY_RECORD_RE.match(n))
            and os.path.isfile(d / n)]
    if not ours:
        return None
    return Capture(path=rel(root, d), kind="memory", files=[rel(root, d / n) for n in ours])


def _stage_file(path: Path) -> tuple[dict, list[dict], list[str]]:
    """(the worker line merged with its device line, the stage-call lines, problems)."""
    worker: dict = {}
    calls: list[dict] = []
    bad, problems = 0, []
    with open(path, "r", encoding="utf-8", errors="replace") as fh:
        for n, line in enumerate(fh, 1):
            if n > MAX_LINES:
                problems.append(f"{path.name}: more than {MAX_LINES} lines: the first {MAX_LINES} read")
                break
            if not line.strip():
                continue
            try:
                x = loads_lenient(line)
            except (ValueError, RecursionError):
                x = None
            kind = x.get("type") if isinstance(x, dict) else None
            if kind == "stage" and isinstance(x.get("stage"), str):
                calls.append(x)
            elif kind in ("worker", "device"):
                if kind == "worker":   # a run's first line: the file was started again by a later run
                    worker, calls = {}, []
                worker.update({k: v for k, v in x.items() if k != "type"})
            elif kind == "note":
                problems.append(f"{path.name}: the worker said: {x.get('note')}")
            elif kind != "dropped":
                bad += 1
    if bad:
        problems.append(f"{path.name}: {bad} line(s) that are no stage-call line left out")
    return worker, calls, problems


def _record(root: Path, d: Path, name: str, top_n: int) -> tuple[dict | None, list[dict], list[str]]:
    """(OOM_RECORDS row, OOM_LIVE rows, warnings) of one record file."""
    try:
        rec = json.loads(read_regular_file(d / name, MAX_RECORD_BYTES))
    except (OSError, ValueError) as exc:
        return None, [], [f"{name}: not read ({type(exc).__name__}: {str(exc)[:200]})"]
    if not isinstance(rec, dict) or rec.get("type") != "memory_record":
        return None, [], [f"{name}: not a memory record"]
    rec["_file"] = name
    live, summary, problem = python_rows(rec, top_n), None, None
    snap = rec.get("snapshot")
    if isinstance(snap, dict) and isinstance(snap.get("file"), str):
        from ..parsing.memory_snapshot import read_memory_snapshot   # only when a record has one (the pickle reader)

        spath = d / os.path.basename(snap["file"])
        try:
            rows, summary = live_at_failure(read_memory_snapshot(spath), rec, top_n)
            live = rows + live
        except MemoryError:
            raise
        except Exception as exc:   # noqa: BLE001 - a bad snapshot never loses the record
            problem = f"{type(exc).__name__}: {str(exc)[:200]}"
    warnings = [f"{name}: its snapshot {snap.get('file')} unreadable ({problem})"] if problem else []
    return record_row(rec, live, summary, problem), live, warnings


def analyse(root: Path, cap: Capture, top_n: int, want_events: bool) -> tuple[dict, None]:
    stages: list[dict] = []
    records: list[dict] = []
    live: list[dict] = []
    warnings: list[str] = []
    workers = 0
    d = root / cap.path
    record_names = [Path(f).name for f in cap.files if formats.MEMORY_RECORD_RE.match(Path(f).name)]
    for f in cap.files:
        name = Path(f).name
        m = formats.MEMORY_STAGES_RE.match(name)
        if m is None:
            continue
        try:
            worker, calls, problems = _stage_file(root / f)
        except OSError as exc:
            warnings.append(f"{name}: not read ({exc})")
            continue
        warnings += problems[:SHOWN] + ([f"{name}: {len(problems) - SHOWN} more problem(s)"] if len(problems) > SHOWN else [])
        if calls:
            workers += 1
            stages += stage_rows(str(worker.get("role") or m["role"]), int(worker.get("rank", m["rank"])), calls,
                                 worker.get("capacity_bytes"), worker.get("host_limit_bytes"), worker.get("host_peak_scope"))
    if len(record_names) > MAX_RECORDS:
        warnings.append(f"{len(record_names)} memory records: the first {MAX_RECORDS} read")
    for name in record_names[:MAX_RECORDS]:
        row, rows, said = _record(root, d, name, top_n)
        warnings += said
        if row is not None:
            records.append(row)
            live += rows
    if not stages and not records:
        raise ValueError("no stage-call lines and no memory records in " + cap.path +
                         (": " + "; ".join(warnings[:SHOWN]) if warnings else ""))
    return {"stage_memory": {"stages": stages, "records": records, "live": live, "workers": workers},
            "warnings": warnings}, None


register_input(InputKind("memory", analyse, order=35, claim_dir=_claim))
