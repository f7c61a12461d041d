"""Analyse one discovered capture (runs in a worker process): files in, a JSON-able dict out.

Every failure is caught here and turned into `status: "failed"` with the path and the reason,
so one bad file never stops the batch.
"""
from __future__ import annotations

import gc
import time
import traceback
from pathlib import Path

from . import ascend, jsonscan, kineto
from .discover import Capture
from .events import EventTable


def _kineto_file(path: Path, top_n: int, want_events: bool) -> tuple[dict, dict | None]:
    if path.stat().st_size == 0:
        raise jsonscan.TraceFormatError("empty file")
    table = EventTable()
    rest = jsonscan.load_trace(path, table.add_batch)
    ev = table.finish()
    base_ns = rest.get("baseTimeNanoseconds") if isinstance(rest, dict) else None
    if isinstance(base_ns, int) and not isinstance(base_ns, bool) and base_ns > 0:
        # newer Kineto writes ts relative to baseTimeNanoseconds (the epoch time of ts 0)
        ev.t0_us += base_ns // 1000
        if base_ns % 1000:
            ev.ts = ev.ts + (base_ns % 1000) / 1000.0
    if ev.n_raw == 0:
        raise jsonscan.TraceFormatError("the trace has no events")
    if len(ev) == 0 and not ev.process_names:
        raise jsonscan.TraceFormatError("no complete ('X') events: not a Chrome/Kineto trace")
    out = kineto.summarise(ev, top_n)
    dist = rest.get("distributedInfo") if isinstance(rest, dict) else None
    if isinstance(dist, dict):
        out["distributed"] = {k: dist.get(k) for k in ("backend", "rank", "world_size") if k in dist}
    events = None
    if want_events:
        events = {"names": [str(x) for x in ev.names], "cats": [str(x) for x in ev.cats],
                  "pids": [str(x) for x in ev.pids], "tids": [str(x) for x in ev.tids],
                  "name": ev.name, "cat": ev.cat, "pid": ev.pid, "tid": ev.tid,
                  "ts": ev.ts + ev.t0_us, "dur": ev.dur}
    return out, events


def _ascend(root: Path, cap: Capture, top_n: int, want_events: bool) -> tuple[dict, dict | None]:
    files = {Path(f).name: root / f for f in cap.files}
    out: dict = {}
    events = None
    if "trace_view.json" in files:
        out, events = _kineto_file(files["trace_view.json"], top_n, want_events)
    if "kernel_details.csv" in files:
        kd = ascend.kernel_details(files["kernel_details.csv"], top_n)
        out["top_kernels"] = kd["top_kernels"]   # richer than trace_view's (type, core)
        out["kernel_types"] = kd["kernel_types"]
        out["n_kernels"] = kd["n_kernels"]
        out["n_bad_kernels"] = kd["n_bad_kernels"]
        if not out.get("device"):
            out["device"] = kd["device"]
            out.setdefault("start_us", kd["start_us"])
            out.setdefault("wall_us", kd["device"]["window_us"] if kd["device"] else 0.0)
    if "step_trace_time.csv" in files:
        out["step_trace"] = ascend.step_trace_time(files["step_trace_time.csv"])
        if not out.get("steps"):
            out["steps"] = [{"step": r["step"], "dur_us": r["dur_us"],
                             "device_busy_us": r.get("computing_us", 0.0) + r.get("communication_exposed_us", 0.0)}
                            for r in out["step_trace"]]
    dbs = [p for n, p in files.items() if n.endswith(".db")]
    if dbs and not out:
        out = ascend.db_summary(dbs[0], top_n)
    if not out:
        raise ValueError("no readable Ascend output files")
    return out, events


def _cluster(path: Path) -> dict:
    rows = ascend.step_trace_time(path)
    ranks = [r for r in rows if (r.get("type") or "").lower() == "rank"]
    if not ranks:
        raise ValueError(f"{path.name}: no per-rank rows (Type == 'rank')")
    for r in ranks:
        r["rank"] = int(float(r["index"]))
    return {"ranks": ranks, "stages": [r for r in rows if (r.get("type") or "").lower() == "stage"]}


def analyse_capture(root: str, cap_dict: dict, top_n: int = 20, want_events: bool = False) -> dict:
    """Worker entry point: returns {"capture": dict, "events": dict | None}."""
    root_p = Path(root)
    cap = Capture(**cap_dict)
    res = cap.to_dict()
    res.update(status="ok", error=None)
    t = time.perf_counter()
    events = None
    # millions of fresh dicts from the JSON parser would trigger the cyclic GC again and again
    # (each pass walks every live object); nothing here makes cycles, so pause it
    gc_was = gc.isenabled()
    gc.disable()
    try:
        if cap.kind in ("torch", "kineto"):
            if not cap.files:
                raise FileNotFoundError("no Kineto trace file (*.json / *.json.gz) in the capture")
            # a capture may hold several traces (one per export); the largest is the capture
            paths = [root_p / f for f in cap.files]
            missing = [str(p) for p in paths if not p.is_file()]
            if missing:
                raise FileNotFoundError(f"listed trace file missing (or not a regular file): {missing[0]}")
            main = max(paths, key=lambda p: p.stat().st_size)
            out, events = _kineto_file(main, top_n, want_events)
            res.update(out)
            dist = out.get("distributed") or {}
            if res.get("rank") is None and isinstance(dist.get("rank"), int):
                res["rank"] = dist["rank"]
        elif cap.kind == "ascend":
            out, events = _ascend(root_p, cap, top_n, want_events)
            res.update(out)
        elif cap.kind == "cluster":
            res.update(_cluster(root_p / cap.files[0]))
        elif cap.kind == "timeline":
            from .timeline import analyse_timeline, load_timeline
            res["timeline"] = analyse_timeline(load_timeline(root_p / cap.path, [root_p / f for f in cap.files]))
        elif cap.kind == "unreadable":
            raise OSError(cap.warnings[-1] if cap.warnings else "unreadable")
        else:
            raise ValueError(f"cannot analyse a capture of kind {cap.kind!r}")
    except Exception as exc:  # noqa: BLE001 - reported per capture, the batch goes on
        res.update(status="failed", error=f"{type(exc).__name__}: {exc}")
        if not isinstance(exc, (ValueError, OSError, jsonscan.TraceFormatError, KeyError)):
            res["traceback"] = traceback.format_exc(limit=5)
        events = None
    finally:
        if gc_was:
            gc.enable()
    res["analyse_s"] = round(time.perf_counter() - t, 4)
    return {"capture": res, "events": events}
