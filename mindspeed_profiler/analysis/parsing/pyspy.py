"""py-spy's Chrome trace (`py-spy record --format chrometrace`) -> frames and time.

py-spy writes a bare JSON array of `B` / `E` events per thread (pid = the sampled process, tid = its
thread, `ts` = microseconds since py-spy started sampling, args filename / line), consecutive samples
of one stack merged into one begin / end pair. Read here into:

  - `spans`: every frame as a complete span (start, end, frame, depth, thread), for the timeline;
  - `segments`: the innermost frame's stretches (start, end, stack), for "where does the time go"
    (self time: the innermost frame; total time: every function on the stack).

Standard library + orjson; nothing of the runtime.
"""
from __future__ import annotations

import gzip
import os
from dataclasses import dataclass, field
from pathlib import Path

import orjson


@dataclass
class PySpyTrace:
    frames: list[tuple[str, str, int]] = field(default_factory=list)   # (function, file, line)
    threads: list[tuple[int, int]] = field(default_factory=list)       # (pid, tid) in order of appearance
    spans: list[tuple[float, float, int, int, int]] = field(default_factory=list)  # (start_us, end_us, frame, depth, thread)
    stacks: list[tuple[int, ...]] = field(default_factory=list)        # frame ids, outermost first
    segments: list[tuple[float, float, int, int]] = field(default_factory=list)  # (start_us, end_us, stack, thread)
    problems: list[str] = field(default_factory=list)

    @property
    def pids(self) -> set[int]:
        return {p for p, _ in self.threads}

    def end_us(self) -> float:
        return max((s[1] for s in self.spans), default=0.0)


def read_pyspy(path: str | os.PathLike) -> PySpyTrace:
    """Parse a py-spy chrometrace file (plain or .gz). Unbalanced events are reported in `problems`
    and closed at the last timestamp; a file that is not a JSON list raises ValueError."""
    raw = Path(path).read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    events = orjson.loads(raw)
    if isinstance(events, dict):
        events = events.get("traceEvents")
    if not isinstance(events, list):
        raise ValueError(f"{Path(path).name}: not a py-spy chrome trace (a JSON list of events)")
    out = PySpyTrace()
    frame_ids: dict[tuple[str, str, int], int] = {}
    stack_ids: dict[tuple[int, ...], int] = {}
    thread_ids: dict[tuple[int, int], int] = {}
    open_: dict[int, list[tuple[int, float]]] = {}   # thread -> [(frame, start)]
    last: dict[int, float] = {}
    t_max = 0.0
    for ev in events:
        if not isinstance(ev, dict) or ev.get("ph") not in ("B", "E"):
            continue
        try:
            ts = float(ev["ts"])
            key = (int(ev.get("pid", 0)), int(ev.get("tid", 0)))
        except (KeyError, TypeError, ValueError):
            continue
        t_max = max(t_max, ts)
        th = thread_ids.get(key)
        if th is None:
            th = thread_ids[key] = len(out.threads)
            out.threads.append(key)
        stack = open_.setdefault(th, [])
        if stack and ts > last.get(th, ts):
            _segment(out, stack_ids, stack, last[th], ts, th)
        last[th] = ts
        if ev["ph"] == "B":
            a = ev.get("args") if isinstance(ev.get("args"), dict) else {}
            fkey = (str(ev.get("name")), str(a.get("filename", "")), int(a.get("line") or 0))
            fid = frame_ids.get(fkey)
            if fid is None:
                fid = frame_ids[fkey] = len(out.frames)
                out.frames.append(fkey)
            stack.append((fid, ts))
        elif stack:
            fid, start = stack.pop()
            out.spans.append((start, ts, fid, len(stack), th))
        else:
            out.problems.append(f"an end without a begin at ts {ts:.0f} us (thread {key[1]})")
    for th, stack in open_.items():
        if stack:
            out.problems.append(f"{len(stack)} frame(s) left open at the end (thread {out.threads[th][1]}): closed at {t_max:.0f} us")
            if t_max > last.get(th, t_max):
                _segment(out, stack_ids, stack, last[th], t_max, th)
            while stack:
                fid, start = stack.pop()
                out.spans.append((start, t_max, fid, len(stack), th))
    return out


def _segment(out: PySpyTrace, stack_ids: dict, stack: list, start: float, end: float, thread: int) -> None:
    key = tuple(f for f, _ in stack)
    sid = stack_ids.get(key)
    if sid is None:
        sid = stack_ids[key] = len(out.stacks)
        out.stacks.append(key)
    out.segments.append((start, end, sid, thread))
