"""Each worker's per-stage memory on the merged timeline (issue 47): `add_memory_tracks(trace,
memory_dir)` reads the metrics tracker's stage-call lines (`<metrics>/memory/<role>_rank<R>.stages.jsonl`,
analysis/inputs/memory_records.py reads the same files) and draws, under the worker's own process
(the one whose spans have the same role and rank, on the reference clock: the clock offset the merge
applied to its spans), a counter "memory peak per stage call (GiB)" with the series `device allocated`,
`device reserved` and `host resident`: at each stage call's start, that call's peaks, held until the
next call. Called by merge.py after the samples; written to timeline.json and timeline.pftrace
(pftrace.write_tail: one counter track per series).

Bounded (MAX_POINTS per worker, the first ones) and forgiving: a line that is no stage call is
skipped, a worker with no process on the timeline or of another run is said in otherData.warnings,
and the timeline is written anyway."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from mindspeed_profiler.core import formats
from mindspeed_profiler.core.fileio import read_json_object

TRACK = "memory peak per stage call (GiB)"
SERIES = (("device allocated", "device_allocated_peak"), ("device reserved", "device_reserved_peak"),
          ("host resident", "host_peak"))
MAX_POINTS = 20_000       # counter points per worker (a point per stage call)
MAX_LINES = 2_000_000     # lines read per file
GIB = 2**30


def memory_dir_of(timeline_dir: str | os.PathLike) -> Path:
    """The memory directory of the run whose timeline is in `timeline_dir`: run.json's
    `metrics.output_dir` (else `integrated.profile_save_path` + /metrics) + /memory, else
    `<timeline_dir>/../metrics/memory`."""
    timeline_dir = Path(timeline_dir)
    for d in (timeline_dir.parent, timeline_dir):
        run = read_json_object(d / formats.RUN_FILE) or {}
        cfg = (run.get("config") or {}).get("profiler_config") if isinstance(run.get("config"), dict) else None
        if not isinstance(cfg, dict):
            continue
        metrics = (cfg.get("metrics") or {}).get("output_dir") if isinstance(cfg.get("metrics"), dict) else None
        save = (cfg.get("integrated") or {}).get("profile_save_path") if isinstance(cfg.get("integrated"), dict) else None
        base = Path(metrics) if isinstance(metrics, str) and metrics else (
            Path(save) / formats.METRICS_DIR if isinstance(save, str) and save else None)
        if base is not None and (base / formats.MEMORY_DIR).is_dir():
            return base / formats.MEMORY_DIR
    return timeline_dir.parent / formats.METRICS_DIR / formats.MEMORY_DIR


def _calls(path: Path) -> tuple[dict, list[dict]]:
    """(the worker line, the stage-call lines of the file's last run)."""
    worker: dict = {}
    calls: list[dict] = []
    with open(path, "r", encoding="utf-8", errors="replace") as fh:
        for n, line in enumerate(fh):
            if n >= MAX_LINES:
                break
            try:
                x = json.loads(line)
            except ValueError:
                continue
            if not isinstance(x, dict):
                continue
            if x.get("type") == "worker":
                worker, calls = x, []
            elif x.get("type") == "stage" and isinstance(x.get("start_ns"), int):
                calls.append(x)
    return worker, calls


def add_memory_tracks(trace: dict, memory_dir: str | os.PathLike | None) -> int:
    """Add the stage-call lines of `memory_dir` to `trace` (a merged timeline: its otherData's
    processes, origin and run id); returns how many events were added. Never raises for a bad file."""
    if memory_dir is None or not Path(memory_dir).is_dir():
        return 0
    other = trace.setdefault("otherData", {})
    warnings = other.setdefault("warnings", [])
    origin = int(other.get("time_origin_unix_ns") or 0)
    run_id = other.get(formats.RUN_ID_KEY)
    procs = [p for p in other.get("processes", []) if isinstance(p, dict) and isinstance(p.get("pid"), int)]
    events: list[dict] = []
    for path in sorted(Path(memory_dir).iterdir()):
        m = formats.MEMORY_STAGES_RE.match(path.name)
        if m is None or not path.is_file():
            continue
        try:
            worker, calls = _calls(path)
        except OSError as exc:
            warnings.append(f"memory {path.name}: not read ({exc})")
            continue
        if run_id and worker.get(formats.RUN_ID_KEY) not in (None, run_id):
            continue   # another run's worker
        role, rank = worker.get("role", m["role"]), worker.get("rank", int(m["rank"]))
        mine = [p for p in procs if p.get("role") == role and p.get("rank") == rank]
        if not mine:
            if calls:
                warnings.append(f"memory {path.name}: worker {role}:{rank} has no spans on the timeline (its tracer "
                                "was off?): its per-stage memory is not drawn")
            continue
        pid, shift = mine[0]["pid"], int(mine[0].get("offset_ns") or 0) - origin
        if len(calls) > MAX_POINTS:
            warnings.append(f"memory {path.name}: {len(calls)} stage calls, the first {MAX_POINTS} drawn")
        for c in calls[:MAX_POINTS]:
            args = {name: c[key] / GIB for name, key in SERIES if isinstance(c.get(key), int)}
            if args:
                events.append({"ph": "C", "name": TRACK, "pid": pid, "tid": 0, "ts": (c["start_ns"] + shift) / 1000.0,
                               "args": args})
    trace.setdefault("traceEvents", []).extend(events)
    return len(events)


def counter_values(trace: dict, role: str, rank: int) -> list[tuple[float, dict[str, Any]]]:
    """(ts, args) of a worker's memory counter points in a merged timeline (tests, tools)."""
    pids = {p["pid"] for p in trace.get("otherData", {}).get("processes", [])
            if p.get("role") == role and p.get("rank") == rank}
    return [(e["ts"], e["args"]) for e in trace.get("traceEvents", [])
            if e.get("ph") == "C" and e.get("name") == TRACK and e.get("pid") in pids]
