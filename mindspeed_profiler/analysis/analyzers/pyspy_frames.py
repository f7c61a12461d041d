"""Where a worker's Python time goes, from py-spy's sampled stacks (parsing/pyspy.py): pure.

`self` time of a function: the time it was the innermost frame; `total` time: the time it was
anywhere on the stack (counted once per stack, so recursion does not inflate it). The launcher's
frames (runpy, our regroup wrapper: on every stack of a wrapped worker) are left out. Time is sampled
time (py-spy merges consecutive samples of one stack), at py-spy's rate: samples ~= time x rate.
"""
from __future__ import annotations

import bisect
from typing import Iterable, Sequence

from ..parsing.pyspy import PySpyTrace

Segment = tuple[float, float, int, int]  # (start_us, end_us, stack, thread)
# the frames that start a worker's script and sit on every stack, telling nothing of where its time
# goes: Python's runpy and our process-group wrapper (system/regroup.py, how a wrapped worker runs)
LAUNCHER_FILES = ("runpy.py", "<frozen runpy>", "mindspeed_profiler/system/regroup.py", "system/regroup.py")


def is_launcher(file: str) -> bool:
    f = file.replace("\\", "/")
    return any(f == x or f.endswith("/" + x) for x in LAUNCHER_FILES)


def short_file(path: str) -> str:
    """The last two components of a source path (`common/workers.py`), enough to tell frames apart."""
    parts = path.replace("\\", "/").rstrip("/").split("/")
    return "/".join(parts[-2:])


def clip(segments: Sequence[Segment], windows: Iterable[tuple[float, float]]) -> list[Segment]:
    """The parts of `segments` inside the windows (sorted, non-overlapping [start, end) pairs)."""
    wins = sorted((a, b) for a, b in windows if b > a)
    if not wins:
        return []
    starts = [a for a, _ in wins]
    out = []
    for s, e, stack, th in segments:
        i = max(0, bisect.bisect_right(starts, s) - 1)
        while i < len(wins) and wins[i][0] < e:
            a, b = wins[i]
            lo, hi = max(s, a), min(e, b)
            if hi > lo:
                out.append((lo, hi, stack, th))
            i += 1
    return out


def frame_times(trace: PySpyTrace, segments: Sequence[Segment], top_n: int = 20) -> dict:
    """{"sampled_ms", "top_self": [...], "top_total": [...]}: rows {function, file, ms, share}."""
    n = len(trace.stacks)
    own = [0.0] * n   # time with this stack innermost
    for s, e, stack, _ in segments:
        own[stack] += e - s
    total = sum(own)
    # a stack's subtree time: children are made after their parent, so one reverse pass adds each
    # node's time into its parent (linear, however deep the stacks)
    sub = own[:]
    for sid in range(n - 1, -1, -1):
        parent = trace.stacks[sid][0]
        if parent >= 0:
            sub[parent] += sub[sid]
    self_t: dict[tuple[str, str], float] = {}
    incl: dict[tuple[str, str], float] = {}
    for sid, (_parent, frame, first) in enumerate(trace.stacks):
        key = trace.frames[frame][:2]
        if is_launcher(str(key[1])):
            continue
        if own[sid]:
            self_t[key] = self_t.get(key, 0.0) + own[sid]
        # total time: the time under the outermost occurrence of a frame (recursion counted once)
        if first and sub[sid]:
            incl[key] = incl.get(key, 0.0) + sub[sid]
    return {"sampled_ms": total / 1e3, "top_self": _rows(self_t, total, top_n), "top_total": _rows(incl, total, top_n)}


def _rows(times: dict[tuple[str, str], float], total: float, top_n: int) -> list[dict]:
    ranked = sorted(times.items(), key=lambda kv: (-kv[1], kv[0]))[:top_n]
    return [{"function": name, "file": short_file(path), "ms": us / 1e3, "share": us / total if total else 0.0}
            for (name, path), us in ranked]


def stage_frame_times(trace: PySpyTrace, segments: Sequence[Segment], stages: Sequence[dict], top_n: int = 10) -> list[dict]:
    """Per stage: the stage's spans (`stage`, `start_us`, `end_us`, on py-spy's clock) clip the
    segments; rows {stage, spans, stage_ms, sampled_ms, top_self, top_total}, longest stage first."""
    by_stage: dict[str, list[tuple[float, float]]] = {}
    for sp in stages:
        by_stage.setdefault(sp["stage"], []).append((sp["start_us"], sp["end_us"]))
    rows = []
    for name, wins in by_stage.items():
        inside = clip(segments, _merge(wins))
        times = frame_times(trace, inside, top_n)
        rows.append({"stage": name, "spans": len(wins), "stage_ms": sum(b - a for a, b in wins) / 1e3, **times})
    return sorted(rows, key=lambda r: -r["stage_ms"])


def _merge(wins: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[list[float]] = []
    for a, b in sorted(wins):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]
