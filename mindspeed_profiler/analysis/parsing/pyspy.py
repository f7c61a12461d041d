"""py-spy's Chrome trace (`py-spy record --format chrometrace`) -> frames and time.

py-spy writes a bare JSON array of `B` / `E` events per thread (pid = the sampled process, tid = its
thread, `ts` = microseconds since py-spy started sampling, args filename / line), consecutive samples
of one stack merged into one begin / end pair. Read here into:

  - `spans`: every frame as a complete span (start, end, frame, depth, thread), for the timeline;
  - `segments`: the innermost frame's stretches (start, end, stack), for "where does the time go"
    (self time: the innermost frame; total time: every function on the stack).

A stack is a node of a tree (its parent stack, its innermost frame), found in constant time per
event: memory and time are linear in the events however deep the stacks (a report of 16,000
nested frames once cost a tuple of the whole stack per event, quadratic). The file is read only
when it is a regular file of at most MAX_BYTES (expanded, for .gz).

Standard library + orjson; nothing of the runtime.
"""
from __future__ import annotations

import gzip
import io
import os
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from mindspeed_profiler.core.fileio import read_regular_file


@dataclass
class PySpyTrace:
    frames: list[tuple[str, str, int]] = field(default_factory=list)   # (function, file, line)
    threads: list[tuple[int, int]] = field(default_factory=list)       # (pid, tid) in order of appearance
    spans: list[tuple[float, float, int, int, int]] = field(default_factory=list)  # (start_us, end_us, frame, depth, thread)
    # (parent stack or -1, frame, whether the frame's function is not already on the parent's stack)
    stacks: list[tuple[int, int, bool]] = field(default_factory=list)
    segments: list[tuple[float, float, int, int]] = field(default_factory=list)  # (start_us, end_us, stack, thread)
    problems: list[str] = field(default_factory=list)

    @property
    def pids(self) -> set[int]:
        return {p for p, _ in self.threads}

    def end_us(self) -> float:
        return max((s[1] for s in self.spans), default=0.0)


MAX_BYTES = 2 << 30


def _read_bytes(path: Path) -> bytes:
    """A regular file's bytes (never a FIFO or a device), at most MAX_BYTES, expanded when gzip (at
    most MAX_BYTES expanded)."""
    raw = read_regular_file(path, MAX_BYTES)
    if raw[:2] == b"\x1f\x8b":
        with gzip.GzipFile(fileobj=io.BytesIO(raw)) as gz:
            raw = gz.read(MAX_BYTES + 1)
        if len(raw) > MAX_BYTES:
            raise ValueError(f"{path.name}: expands to more than {MAX_BYTES} bytes")
    return raw


def read_pyspy(path: str | os.PathLike) -> PySpyTrace:
    """Parse a py-spy chrometrace file (plain or .gz). Unbalanced events are reported in `problems`
    and closed at the last timestamp; a file that is not a JSON list raises ValueError."""
    events = orjson.loads(_read_bytes(Path(path)))
    if isinstance(events, dict):
        events = events.get("traceEvents")
    if not isinstance(events, list):
        raise ValueError(f"{Path(path).name}: not a py-spy chrome trace (a JSON list of events)")
    out = PySpyTrace()
    frame_ids: dict[tuple[str, str, int], int] = {}
    stack_ids: dict[tuple[int, int], int] = {}         # (parent stack, frame) -> stack
    thread_ids: dict[tuple[int, int], int] = {}
    open_: dict[int, list[tuple[int, float, int]]] = {}   # thread -> [(frame, start, stack)]
    on_path: dict[int, dict[tuple, int]] = {}            # thread -> (function, file) -> times on its open stack
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
            out.segments.append((last[th], ts, stack[-1][2], th))
        last[th] = ts
        if ev["ph"] == "B":
            a = ev.get("args") if isinstance(ev.get("args"), dict) else {}
            try:
                line = int(a.get("line") or 0)
            except (TypeError, ValueError):
                line = 0
            fkey = (str(ev.get("name")), str(a.get("filename", "")), line)
            fid = frame_ids.get(fkey)
            if fid is None:
                fid = frame_ids[fkey] = len(out.frames)
                out.frames.append(fkey)
            counts = on_path.setdefault(th, {})
            func = fkey[:2]
            parent = stack[-1][2] if stack else -1
            sid = stack_ids.get((parent, fid))
            if sid is None:
                sid = stack_ids[(parent, fid)] = len(out.stacks)
                out.stacks.append((parent, fid, counts.get(func, 0) == 0))
            counts[func] = counts.get(func, 0) + 1
            stack.append((fid, ts, sid))
        elif stack:
            fid, start, _ = stack.pop()
            on_path[th][out.frames[fid][:2]] -= 1
            out.spans.append((start, ts, fid, len(stack), th))
        else:
            out.problems.append(f"an end without a begin at ts {ts:.0f} us (thread {key[1]})")
    for th, stack in open_.items():
        if stack:
            out.problems.append(f"{len(stack)} frame(s) left open at the end (thread {out.threads[th][1]}): closed at {t_max:.0f} us")
            if t_max > last.get(th, t_max):
                out.segments.append((last[th], t_max, stack[-1][2], th))
            while stack:
                fid, start, _ = stack.pop()
                out.spans.append((start, t_max, fid, len(stack), th))
    return out
