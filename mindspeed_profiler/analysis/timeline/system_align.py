"""Putting a wrapped worker's py-spy report on the run's clock (offline, pure but for reading).

Three clocks meet here:
  - py-spy's `ts`: microseconds since py-spy started, which is when the launcher exec'd into it:
    the metadata's `launched_wall_ns` (the worker's wall clock, taken just before the exec; py-spy
    starts within a few milliseconds of it);
  - the worker's wall clock (its iteration records);
  - the merged timeline's `ts`: microseconds since `otherData.time_origin_unix_ns` on the driver's
    clock; each process's `offset_ns` (otherData.processes) maps its clock to the driver's.
A worker is found on the timeline by (host, os_pid): the pid py-spy sampled is the worker's own.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mindspeed_profiler.core import formats
from mindspeed_profiler.core.fileio import read_json_object


@dataclass(frozen=True)
class Alignment:
    anchor_wall_ns: int   # py-spy ts 0, on the worker's wall clock
    offset_ns: int = 0    # worker clock -> the timeline's reference clock
    origin_ns: int = 0    # timeline ts 0

    def pyspy_to_timeline_us(self, ts_us: float) -> float:
        return (self.anchor_wall_ns - self.origin_ns + self.offset_ns) / 1e3 + ts_us

    def timeline_to_pyspy_us(self, ts_us: float) -> float:
        return ts_us - (self.anchor_wall_ns - self.origin_ns + self.offset_ns) / 1e3

    def wall_to_pyspy_us(self, wall_ns: int) -> float:
        return (wall_ns - self.anchor_wall_ns) / 1e3


def find_process(trace: dict, host: str | None, os_pid: int | None) -> dict | None:
    """The timeline's process entry (otherData.processes) of the worker at (host, os_pid)."""
    if os_pid is None:
        return None
    for p in (trace.get("otherData") or {}).get("processes") or []:
        if isinstance(p, dict) and p.get("os_pid") == os_pid and (host is None or p.get("host") == host):
            return p
    return None


def stage_spans(trace: dict, pid: int) -> list[dict]:
    """The stage spans of one timeline process: {stage, iteration, ts, dur} (timeline microseconds)."""
    out = []
    for e in trace.get("traceEvents") or []:
        if isinstance(e, dict) and e.get("ph") == "X" and e.get("cat") == formats.CAT_STAGE and e.get("pid") == pid:
            a = e.get("args") if isinstance(e.get("args"), dict) else {}
            try:
                out.append({"stage": str(a.get("stage") or e.get("name")), "iteration": a.get("iteration"),
                            "ts": float(e["ts"]), "dur": float(e.get("dur", 0.0))})
            except (KeyError, TypeError, ValueError):
                continue
    return out


def timeline_candidates(system_dir: Path, run_id: str | None) -> tuple[Path, list[Path]]:
    """(the timeline directory of the run that wrote `system_dir`, its merged files to try in order):
    `<profile_save_path>/timeline` or run.json's tracer.output_dir; this run's own
    `timeline.<run_id>.json` first, then timeline.json(.gz)."""
    save = Path(system_dir).parent
    where = save / formats.TIMELINE_DIR
    try:
        run = read_json_object(save / formats.RUN_FILE)   # never a FIFO; None: a TypeError below
        configured = run["config"]["profiler_config"]["tracer"].get("output_dir")
        if isinstance(configured, str) and configured:
            where = Path(configured)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        pass
    names = ([formats.run_timeline_file(run_id), formats.run_timeline_file(run_id) + ".gz"] if run_id else []) + \
        list(formats.TIMELINE_FILES)
    return where, [where / n for n in names if (where / n).is_file()]


def pyspy_anchor(meta: dict[str, Any], marks: list[dict], spy: Any) -> tuple[int | None, str, float | None]:
    """(wall-clock ns of py-spy's ts 0, how it was found, uncertainty in us).

    Best: the worker's clock mark (formats.CLOCK_MARK_FUNCTION ran from W0 to W1 on its wall clock),
    seen in the samples from T0 (the first sample inside it) to T1 (the first sample after it); each
    sample lands up to one period after the instant it stands for, so ts 0 is at
    mean(W0 - T0, W1 - T1) + period / 2, within about half a period. Else the launcher's exec time
    (py-spy starts some milliseconds after it: its frames then look that much early)."""
    exec_anchor = meta.get("launched_wall_ns") if isinstance(meta.get("launched_wall_ns"), int) else None
    mark = marks[0] if marks else None
    spans = [(s[0], s[1]) for s in spy.spans if spy.frames[s[2]][0] == formats.CLOCK_MARK_FUNCTION] if mark else []
    if mark and spans:
        t0, t1 = min(a for a, _ in spans), max(b for _, b in spans)
        period_us = 1e6 / float(mark.get("rate_hz") or 100.0)
        w0, w1 = int(mark["begin_wall_ns"]), int(mark["end_wall_ns"])
        a0, a1 = w0 - t0 * 1e3, w1 - t1 * 1e3
        anchor = int((a0 + a1) / 2 + period_us * 1e3 / 2)
        return anchor, "clock_mark", round(period_us / 2 + abs(a0 - a1) / 2e3, 1)
    if exec_anchor is not None:
        return exec_anchor, "exec", None
    return None, "none", None


def alignment_for(anchor: int | None, process: dict | None, trace: dict | None) -> Alignment | None:
    if anchor is None:
        return None
    if trace is None:
        return Alignment(anchor)
    origin = (trace.get("otherData") or {}).get("time_origin_unix_ns") or 0
    offset = (process or {}).get("offset_ns") or 0
    return Alignment(int(anchor), int(offset), int(origin))
