"""Each generating worker's samples on the merged timeline: `add_sample_tracks(trace, samples_dir)`
puts the records of `<save_path>/samples/<role>_rank<R>.jsonl` (docs/rollout.md, read by
parsing/samples.py) under that worker's own process, the one whose spans have the same role and
rank, on the reference clock (the clock offset the merge applied to the worker's spans). Called by
merge.py after the py-spy tracks; written to timeline.json and timeline.pftrace (pftrace.write_tail).

Per worker and stage: threads "samples (<stage>)" ("... lane k" for the k-th), one slice
`sample <id>` per sample with its phases nested (queue / prefill / decode from the engine's
seconds, "first token" an instant), laid out first-fit by start on at most MAX_LANES lanes (a
Perfetto track needs nested slices), and a counter "samples (<stage>)" with the series `running`
(every timed sample) and `not drawn` (those that found no lane or passed the cap: the first
MAX_SLICES_PER_WORKER by start, fewer when MAX_SLICES_TOTAL shared by all workers is less).
What is not placed (no usable times, another run, corrupt lines) is said in otherData.warnings;
the timeline is written anyway. docs/rollout.md "On the timeline" describes it for users.
"""
from __future__ import annotations

import heapq
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

from mindspeed_profiler.core import formats
from mindspeed_profiler.core.fileio import read_json_object

from mindspeed_profiler.analysis.parsing.samples import Sample, read_samples

SAMPLES_TID_BASE = 8_000_000   # above Linux pid_max (2**22), below the merge's overlap lanes (9 M)
TIDS_PER_STAGE = 100           # a stage's lanes: SAMPLES_TID_BASE + 100 * stage index + lane
MAX_LANES = 64                 # lanes per worker and stage; a sample that finds none is only counted
MAX_SLICES_PER_WORKER = 20_000  # samples drawn per worker (their phases with them), the first by start
MAX_SLICES_TOTAL = 100_000     # and in all: with many workers each gets an equal share (events are held in memory)
MAX_COUNTER_POINTS = 10_000    # per worker and stage; beyond, the peak of each equal time bin
MAX_STAGES_PER_WORKER = 1000  # stage names are free text: tids stay below the overlap lanes
MAX_PROBLEMS_SAID = 3          # corrupt lines named per file (then a count)
CAT_SAMPLE, CAT_PHASE = "sample", "sample_phase"
SLICE_ARGS = ("id", "iteration", "response_tokens", "prompt_tokens", "finish_reason", "truncated", "policy_version",
              "queue_s", "prefill_s", "decode_s", "reward_s", "tool_s", "problem")


def samples_dir_of(timeline_dir: str | os.PathLike) -> Path:
    """The samples directory of the run whose timeline is in `timeline_dir`: `samples/` beside the
    run's run.json (the save path, wherever the run now lies), else run.json's absolute
    `integrated.profile_save_path` + /samples, else `<timeline_dir>/../samples`. A relative save path
    is never resolved: it was relative to the training's working directory, not to ours."""
    timeline_dir = Path(timeline_dir)
    for d in (timeline_dir.parent, timeline_dir):
        if (d / formats.RUN_FILE).is_file() and (d / formats.SAMPLES_DIR).is_dir():
            return d / formats.SAMPLES_DIR
        try:
            run = read_json_object(d / formats.RUN_FILE)   # None: a TypeError below
            save = run["config"]["profiler_config"]["integrated"]["profile_save_path"]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if isinstance(save, str) and os.path.isabs(save) and (Path(save) / formats.SAMPLES_DIR).is_dir():
            return Path(save) / formats.SAMPLES_DIR
    return timeline_dir.parent / formats.SAMPLES_DIR


# ------------------------------------------------------------------------------ pure layout


def first_fit_lanes(spans: Sequence[tuple[int, int]], max_lanes: int) -> list[Optional[int]]:
    """The lane (0-based) of each (start, end) span, greedy first-fit in start order (the longer
    first at equal starts): the lowest lane whose last span ended at or before the start; None
    when all `max_lanes` are busy."""
    order = sorted(range(len(spans)), key=lambda i: (spans[i][0], -spans[i][1], i))
    busy: list[tuple[int, int]] = []   # (end, lane)
    free: list[int] = []               # lanes freed, lowest first
    used = 0
    out: list[Optional[int]] = [None] * len(spans)
    for i in order:
        start, end = spans[i]
        while busy and busy[0][0] <= start:
            heapq.heappush(free, heapq.heappop(busy)[1])
        if free:
            lane = heapq.heappop(free)
        elif used < max_lanes:
            lane, used = used, used + 1
        else:
            continue
        out[i] = lane
        heapq.heappush(busy, (end, lane))
    return out


def running_counts(spans: Sequence[tuple[int, int]], hidden: Sequence[bool]) -> list[tuple[int, int, int]]:
    """(time, spans running, hidden spans running) at each time the counts change; a span that ends
    when another starts is not counted twice."""
    changes: dict[int, list[int]] = {}
    for (start, end), h in zip(spans, hidden):
        for t, d in ((start, 1), (end, -1)):
            c = changes.setdefault(t, [0, 0])
            c[0] += d
            c[1] += d if h else 0
    out, run, hid = [], 0, 0
    for t in sorted(changes):
        run, hid = run + changes[t][0], hid + changes[t][1]
        out.append((t, run, hid))
    return out


def thin(points: list[tuple[int, int, int]], max_points: int) -> list[tuple[int, int, int]]:
    """At most `max_points` of a counter's points: per equal time bin, the one with the most running
    (the peaks stay visible); the last point (usually back to 0) is kept."""
    if len(points) <= max_points:
        return points
    t0, t1 = points[0][0], points[-1][0]
    width = max(1, -(-(t1 - t0) // (max_points - 1)))
    best: dict[int, tuple[int, int, int]] = {}
    for p in points[:-1]:
        b = (p[0] - t0) // width
        if b not in best or p[1] > best[b][1]:
            best[b] = p
    return [best[b] for b in sorted(best)] + [points[-1]]


def phases(s: Sample) -> list[tuple[str, int, int]]:
    """The sample's phases known from the engine's seconds, (name, start_ns, end_ns), in order,
    nested in [start, end] and not overlapping: queue from the start, prefill after it, decode
    up to the end (clipped to what the earlier ones leave)."""
    if s.start_ns is None or s.end_ns is None:
        return []
    out, cursor, end = [], s.start_ns, s.end_ns
    for name, secs in (("queue", s.queue_s), ("prefill", s.prefill_s)):
        if secs is not None:
            stop = min(end, cursor + round(secs * 1e9))
            if stop > cursor:
                out.append((name, cursor, stop))
            cursor = stop
    if s.decode_s is not None:
        begin = max(cursor, end - round(s.decode_s * 1e9))
        if end > begin:
            out.append(("decode", begin, end))
    return out


def drawable(s: Sample) -> bool:
    """Start and end known and in order (a writer's note on another field does not hide it)."""
    return s.start_ns is not None and s.end_ns is not None and s.end_ns >= s.start_ns


# ------------------------------------------------------------------------------ the events


@dataclass
class _Worker:
    pid: int
    name: str
    offset_ns: int
    on_timeline: bool


def add_sample_tracks(trace: dict, samples_dir: str | os.PathLike | None) -> int:
    """Add the samples files of `samples_dir` to `trace` (a merged timeline: its otherData's
    processes, origin and run id); returns how many events were added. Never raises for a bad
    file: it is named in otherData.warnings."""
    if samples_dir is None or not Path(samples_dir).is_dir():
        return 0
    other = trace.setdefault("otherData", {})
    warnings = other.setdefault("warnings", [])
    placed: list[dict] = []
    added = 0
    paths = sorted(p for p in Path(samples_dir).iterdir() if formats.SAMPLES_FILE_RE.match(p.name))
    cap = max(1, min(MAX_SLICES_PER_WORKER, MAX_SLICES_TOTAL // max(1, len(paths))))
    for path in paths:
        try:
            n, info = _add_file(trace, path, cap)
        except Exception as exc:  # noqa: BLE001 - one bad file never stops the merge
            warnings.append(f"samples {path.name}: not placed ({type(exc).__name__}: {exc})")
            continue
        added += n
        warnings += info.pop("warnings")
        placed += info["stages"]
    if placed:
        other["sample_tracks"] = placed
    return added


def _add_file(trace: dict, path: Path, cap: int) -> tuple[int, dict]:
    f = read_samples(path)
    notes = [f"samples {path.name}: line {ln}: {msg}" for ln, msg in f.problems[:MAX_PROBLEMS_SAID]]
    if len(f.problems) > MAX_PROBLEMS_SAID:
        notes.append(f"samples {path.name}: {len(f.problems) - MAX_PROBLEMS_SAID} more problem(s) reading it")
    other = trace.get("otherData", {})
    run_id = other.get(formats.RUN_ID_KEY)
    samples = [s for s in f.samples if not (run_id and s.run_id and s.run_id != run_id)]
    if len(samples) < len(f.samples):
        notes.append(f"samples {path.name}: {len(f.samples) - len(samples)} sample(s) of another run left out")
    if not samples:
        return 0, {"warnings": notes, "stages": []}
    writer = f.pid if f.pid is not None else next((b.pid for b in f.batches if b.pid is not None), None)
    w = _worker(trace, f.role, f.rank, notes, path.name, writer)
    shift = w.offset_ns - int(other.get("time_origin_unix_ns") or 0)  # wall ns -> ns since the origin, reference clock
    timed = sorted((s for s in samples if drawable(s)), key=lambda s: (s.start_ns, s.line))
    untimed = [s for s in samples if not drawable(s)]
    if untimed:
        notes.append(f"{w.name}: {len(untimed)} sample(s) without usable start / end times not drawn "
                     f"(line {untimed[0].line}: {untimed[0].problem or 'start_ns or end_ns null'})")
    timed = _in_window(timed, other.get("cut"), shift)
    over_cap = {id(s) for s in timed[cap:]}
    if over_cap:
        notes.append(f"{w.name}: {len(timed)} timed samples, only the first {cap} by start drawn "
                     f"(the counter 'not drawn' counts the other {len(over_cap)})")
    stages: dict[str, list[Sample]] = {}
    for s in timed:
        stages.setdefault(s.stage, []).append(s)
    if len(stages) > MAX_STAGES_PER_WORKER:
        notes.append(f"{w.name}: samples of {len(stages)} stages; those of the first {MAX_STAGES_PER_WORKER} drawn")
    events: list[dict] = []
    infos = []
    for k, (stage, group) in enumerate(list(stages.items())[:MAX_STAGES_PER_WORKER]):
        info = _add_stage(events, w, stage, group, over_cap, SAMPLES_TID_BASE + TIDS_PER_STAGE * k, shift)
        info["untimed"] = sum(1 for s in untimed if s.stage == stage)
        if info["over_lanes"]:
            notes.append(f"{w.name}: {info['over_lanes']} sample(s) of {stage} ran while {MAX_LANES} others did: "
                         "not drawn (the counter 'not drawn' counts them)")
        infos.append(info)
    trace.setdefault("traceEvents", []).extend(events)
    return len(events), {"warnings": notes, "stages": infos}


def _in_window(timed: list[Sample], cut: Any, shift: int) -> list[Sample]:
    """The samples overlapping the window `merge --window` kept (otherData.cut.window_s, seconds
    since the origin, None = open), all when there is none."""
    window = cut.get("window_s") if isinstance(cut, dict) else None
    if not isinstance(window, list) or len(window) != 2 or window == [None, None]:
        return timed
    lo = None if window[0] is None else window[0] * 1e9
    hi = None if window[1] is None else window[1] * 1e9
    return [s for s in timed if (hi is None or s.start_ns + shift < hi) and (lo is None or s.end_ns + shift >= lo)]


def _worker(trace: dict, role: str, rank: int, notes: list, fname: str, os_pid: int | None = None) -> _Worker:
    """The worker's process on the timeline (its spans' role and rank; of those, the writer's
    process `os_pid` when it is one of them), else a new one."""
    procs = [p for p in trace.get("otherData", {}).get("processes", [])
             if p.get("role") == role and p.get("rank") == rank and isinstance(p.get("pid"), int)]
    procs = [p for p in procs if p.get("os_pid") == os_pid] or procs
    if procs:
        p = procs[0]
        if len(procs) > 1:
            notes.append(f"samples {fname}: {len(procs)} processes are {role}:{rank} on the timeline; placed under "
                         f"{p.get('name')} (pid {p.get('os_pid')}@{p.get('host')})")
        return _Worker(p["pid"], str(p.get("name")), int(p.get("offset_ns") or 0), True)
    evs = trace.setdefault("traceEvents", [])
    pid = 1 + max((e.get("pid", 0) for e in evs if isinstance(e, dict) and isinstance(e.get("pid"), int)), default=0)
    name = f"{role}:{rank} (samples)"
    evs.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": name}})
    notes.append(f"samples {fname}: worker {role}:{rank} has no spans on the timeline (its tracer was off?): "
                 "its samples are a process of their own, on their own wall clock (no clock offset known)")
    return _Worker(pid, name, 0, False)


def _add_stage(events: list, w: _Worker, stage: str, group: list[Sample], over_cap: set, tid0: int,
               shift: int) -> dict:
    """One stage's lanes, slices and counter for worker `w` (`shift`: wall ns -> ns since the origin)."""
    candidates = [s for s in group if id(s) not in over_cap]
    lanes = first_fit_lanes([(s.start_ns, s.end_ns) for s in candidates], MAX_LANES)
    lane_of = {id(s): lane for s, lane in zip(candidates, lanes)}
    track = f"samples ({stage})"
    used = sorted({lane for lane in lanes if lane is not None})
    for lane in used:
        events.append({"ph": "M", "name": "thread_name", "pid": w.pid, "tid": tid0 + lane,
                       "args": {"name": track if lane == 0 else f"{track} lane {lane + 1}"}})
    drawn = 0
    for s in candidates:
        lane = lane_of[id(s)]
        if lane is not None:
            drawn += 1
            _sample_events(events, s, w.pid, tid0 + lane, shift)
    hidden = [lane_of.get(id(s)) is None for s in group]
    points = thin(running_counts([(s.start_ns, s.end_ns) for s in group], hidden), MAX_COUNTER_POINTS)
    some_hidden = any(hidden)
    for t, running, not_drawn in points:
        args = {"running": running, "not drawn": not_drawn} if some_hidden else {"running": running}
        events.append({"ph": "C", "name": track, "pid": w.pid, "tid": 0, "ts": (t + shift) / 1000.0, "args": args})
    return {"worker": w.name, "pid": w.pid, "stage": stage, "samples": len(group), "drawn": drawn, "lanes": len(used),
            "over_cap": len(group) - len(candidates), "over_lanes": len(candidates) - drawn,
            "clock_offset_ns": w.offset_ns if w.on_timeline else None, "on_worker_process": w.on_timeline}


def _span(name: str, cat: str, a: int, b: int, pid: int, tid: int, args: dict) -> dict:
    """A slice from ns since the origin; its dur from the ns difference (so ts + dur is its end exactly)."""
    return {"ph": "X", "name": name, "cat": cat, "ts": a / 1000.0, "dur": (b - a) / 1000.0, "pid": pid, "tid": tid,
            "args": args}


def _sample_events(events: list, s: Sample, pid: int, tid: int, shift: int) -> None:
    args: dict[str, Any] = {k: getattr(s, k) for k in SLICE_ARGS if getattr(s, k) is not None}
    if "response_tokens" in args:
        args["tokens"] = args.pop("response_tokens")
    events.append(_span(f"sample {s.id}", CAT_SAMPLE, s.start_ns + shift, s.end_ns + shift, pid, tid, args))
    for name, a, b in phases(s):
        events.append(_span(name, CAT_PHASE, a + shift, b + shift, pid, tid, {"sample": s.id}))
    ft = s.first_token_ns
    if ft is not None and s.start_ns <= ft <= s.end_ns:
        events.append({"ph": "i", "s": "t", "name": "first token", "cat": CAT_PHASE, "ts": (ft + shift) / 1000.0,
                       "pid": pid, "tid": tid, "args": {"sample": s.id}})
