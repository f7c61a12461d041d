"""Merge per-process segments into one Chrome Trace object that Perfetto opens directly, and the
same timeline as Perfetto's protobuf trace (`timeline.pftrace`, pftrace.py).

Offline code (the runtime tracer writes segments; this reads them): `build_timeline(dir)` is pure
apart from reading the segments (and holds the whole timeline); `write_timeline(dir)` /
`merge_timeline_dir(dir)` stream: each segment is read once and its events spilled sorted to a
temporary file (timeline_spill.py), then a k-way merge writes `timeline.json` (or `.json.gz`) and
`timeline.pftrace` next to them, atomically, in bounded memory (timeline_stream.py). Both give the
same JSON. The py-spy frames (system_tracks.py) and each generating worker's samples
(sample_tracks.py) follow the spans. Partial data is fine: a process that crashed contributes what it flushed, a truncated
last line is skipped and reported in `otherData.warnings`; `Cut` keeps a time window and / or the
first N events, and says what it dropped.

Runs: every segment session carries its run's id (header `run_id`). A directory written by two
runs holds sessions of both (even in one file, when a pid comes back): `build_timeline(dir,
run_id)` merges one run's sessions only, never mixing them; `write_timeline` writes one file per
run when there are several (`timeline.<run_id>.json`) and `timeline.json` for the latest.

Times: each span's monotonic start is mapped to its process's wall clock (header anchor), then to
the reference (driver) clock by the recorded offset. `ts` is in microseconds since
`otherData.time_origin_unix_ns` (relative, so doubles keep sub-microsecond precision).
"""
from __future__ import annotations

import gzip as _gzip
import os
import pathlib
import shutil
import tempfile
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Callable, Optional

import orjson

from mindspeed_profiler.core.fileio import atomic_path, read_json_object, write_atomic

from mindspeed_profiler.core import formats
from mindspeed_profiler.core.gcpause import collector_paused
from mindspeed_profiler.analysis.parsing import segments as segment
from mindspeed_profiler.analysis.timeline.pftrace import PftraceWriter, write_tail
from mindspeed_profiler.analysis.timeline.memory_tracks import add_memory_tracks, memory_dir_of
from mindspeed_profiler.analysis.timeline.sample_tracks import add_sample_tracks, samples_dir_of
from mindspeed_profiler.analysis.timeline.system_tracks import add_system_tracks, system_dir_of
from mindspeed_profiler.analysis.parsing.rlinf_trace import RLINF_TRACE_FILE, combine, read_rlinf_events, to_timeline
from mindspeed_profiler.analysis.timeline.spill import scan_segments
from mindspeed_profiler.analysis.timeline.stream import ANY_RUN, Cut, TimelinePlan, full_args, plan_timeline, runs_of  # noqa: F401 (ANY_RUN: re-exported, build_timeline(run_id=ANY_RUN))

TIMELINE_NAME = formats.TIMELINE_FILE
BROWSER_MAX_EVENTS = 10_000_000    # beyond these, a browser tab (Perfetto's JSON import, chrome://tracing)
BROWSER_MAX_BYTES = 1 << 30        # runs out of memory: the merge says so and points to the .pftrace
# the metrics tracker's per-iteration values drawn as counter tracks: (row key, track name, unit)
COUNTERS = (("perf/throughput", "tokens/s", "tokens/s"),
            ("perf/max_memory_allocated_gb", "max memory allocated", "GiB"),
            ("perf/max_memory_reserved_gb", "max memory reserved", "GiB"))


pftrace_name = formats.pftrace_name   # its home is formats (the console names the file too)


def resolve_timeline_dir(path: str) -> str:
    """`path` itself if it holds segments (or RLinf's trace_events.jsonl), else `path/timeline` if
    that exists."""
    if os.path.isdir(path) and any(n.endswith(formats.SEGMENT_SUFFIX) or n == RLINF_TRACE_FILE for n in os.listdir(path)):
        return path
    sub = os.path.join(path, formats.TIMELINE_DIR)
    if os.path.isdir(sub):
        return sub
    return path


@dataclass
class SegmentSet:
    """Every readable segment session of a timeline directory, and the problems met reading them."""

    sessions: list = field(default_factory=list)  # (path, Session)
    warnings: list = field(default_factory=list)

    def runs(self) -> list[str | None]:
        """The run ids of the sessions, the latest run last (by its first session's start)."""
        return runs_of(self.sessions)


def _segment_paths(timeline_dir: str) -> list[str]:
    if not os.path.isdir(timeline_dir):
        raise FileNotFoundError(f"timeline directory {timeline_dir!r} does not exist")
    paths = list(segment.iter_segment_paths(timeline_dir))
    if not paths:
        raise FileNotFoundError(f"no *{formats.SEGMENT_SUFFIX} segment files in {timeline_dir!r} (was tracer.enable on?)")
    return paths


def read_segments(timeline_dir: str) -> SegmentSet:
    """Every session with its events, in memory (the analysis' own reads; the merge streams)."""
    timeline_dir = resolve_timeline_dir(str(timeline_dir))
    out = SegmentSet()
    for path in _segment_paths(timeline_dir):
        try:
            seg = segment.read_segment(path)
        except OSError as exc:
            out.warnings.append(f"{os.path.basename(path)}: unreadable ({exc}); skipped")
            continue
        out.warnings += [f"{os.path.basename(path)}:{ln}: {msg}" for ln, msg in seg.problems]
        out.sessions += [(path, sess) for sess in seg.sessions]
    return out


def build_timeline(timeline_dir: str, run_id: Any = None, segments: SegmentSet | None = None,
                   cut: Cut | None = None) -> dict:
    """The merged Chrome Trace object of one run's segments under `timeline_dir`: `run_id`, or the
    latest run when None (`ANY_RUN`: every session, runs mixed). Holds every event: for a large
    timeline, write_timeline streams."""
    segs = segments if segments is not None else read_segments(timeline_dir)
    plan = plan_timeline(segs.sessions, segs.warnings, run_id, getattr(segs, "events", None), str(timeline_dir))
    plan.cut = cut or Cut()
    events = plan.events()
    return {"traceEvents": plan.meta + events, "displayTimeUnit": "ms", "otherData": plan.other_data()}


@dataclass
class MergeResult:
    """What merge_timeline_dir wrote: timeline.json[.gz], timeline.pftrace (None when not asked),
    and the otherData of timeline.json (processes, warnings, cut)."""

    path: pathlib.Path
    pftrace: Optional[pathlib.Path]
    other: dict


def write_timeline(timeline_dir: str, gzip: bool = False) -> pathlib.Path:
    """Merge the segments and write `<timeline_dir>/timeline.json[.gz]` and `timeline.pftrace`
    (atomically): the latest run's; when the directory holds several runs, also
    `timeline.<run_id>.json[.gz]` / `.pftrace` for each. Returns the path of timeline.json[.gz]."""
    return merge_timeline_dir(timeline_dir, gzip=gzip).path


def merge_timeline_dir(timeline_dir: str, gzip: bool = False, cut: Cut | None = None,
                       pftrace: bool = True) -> MergeResult:
    """write_timeline with its options: `cut` (a window and / or the first N events of the tracer's
    spans, said in otherData.cut and the warnings), `pftrace` (also write timeline.pftrace)."""
    timeline_dir = resolve_timeline_dir(str(timeline_dir))
    directory = pathlib.Path(timeline_dir)
    rlinf = _rlinf_timeline(directory)
    if rlinf is not None and not any(n.endswith(formats.SEGMENT_SUFFIX) for n in os.listdir(timeline_dir)):
        out = _write_trace(directory, TIMELINE_NAME, rlinf, gzip)   # RLinf's alone, Perfetto-ready
        pf = _write_pftrace_of(directory / pftrace_name(TIMELINE_NAME), rlinf) if pftrace else None
        return MergeResult(out, pf, rlinf["otherData"])
    # millions of short-lived tuples and no cycles: the collector's passes would cost ~10% of the merge
    with collector_paused():
        return _merge_segments(directory, timeline_dir, rlinf, gzip, cut, pftrace)


def _merge_segments(directory: pathlib.Path, timeline_dir: str, rlinf: dict | None, gzip: bool, cut: Cut | None,
                    pftrace: bool) -> MergeResult:
    scanned = scan_segments(_segment_paths(timeline_dir), spill_dir=timeline_dir)
    try:
        runs = runs_of(scanned.sessions)
        counters = _read_counters(directory)
        result = _write_streamed(directory, TIMELINE_NAME, _plan(scanned, None, timeline_dir), rlinf, gzip, cut,
                                 pftrace, counters)
        if len(runs) > 1:
            for rid in runs:
                _write_streamed(directory, formats.run_timeline_file(str(rid)), _plan(scanned, rid, timeline_dir),
                                None, gzip, cut, pftrace, counters)
    finally:
        scanned.spill.close()
    return result


def _plan(scanned: Any, run_id: Any, where: str) -> TimelinePlan:
    return plan_timeline(scanned.sessions, scanned.warnings, run_id, scanned.events, where)


def _write_streamed(directory: pathlib.Path, name: str, plan: TimelinePlan, rlinf: dict | None, gzip: bool,
                    cut: Cut | None, pftrace: bool, counters: dict) -> MergeResult:
    """One timeline file (and its .pftrace) from a plan, streaming its events: JSON to a temporary
    body (the metadata, finished only at the end, goes first), protobuf straight to its file."""
    plan.cut = cut or Cut()
    if plan.n_events > BROWSER_MAX_EVENTS and not plan.cut.active():
        plan.warnings.append(_too_big(f"holds {plan.n_events} events"))
    pf_out = directory / pftrace_name(name)
    with tempfile.TemporaryFile(dir=directory, prefix=".timeline-body-") as body, \
            (atomic_path(pf_out) if pftrace else _nothing()) as pf_tmp, \
            (open(pf_tmp, "wb") if pftrace else _nothing()) as pf_fh:
        writer = _pftrace_writer(pf_fh, plan) if pftrace else None
        hook = _counter_hook(writer, counters, plan) if writer is not None and counters else None
        for chunk, items in plan.batches(slices=writer is not None):
            body.write(chunk)   # every event led by a comma: the first one is skipped in _write_json
            if writer is not None:
                writer.slices(items, hook)
        trace = {"traceEvents": list(plan.meta), "displayTimeUnit": "ms", "otherData": plan.other_data()}
        n_meta = len(trace["traceEvents"])
        if rlinf is not None:
            trace = combine(trace, rlinf)
        add_system_tracks(trace, system_dir_of(directory))  # py-spy frames of this run's wrapped workers
        add_sample_tracks(trace, samples_dir_of(directory))  # each generating worker's samples (sample_tracks.py)
        add_memory_tracks(trace, memory_dir_of(directory))   # each worker's per-stage memory (memory_tracks.py)
        tail = trace["traceEvents"][n_meta:]
        n_body = max(0, body.tell() - 1)
        if n_body > BROWSER_MAX_BYTES:
            trace["otherData"]["warnings"].append(_too_big(f"is {n_body / 2**30:.1f} GiB"))
        if writer is not None:
            if plan.cut_report is not None:
                c = trace["otherData"]["cut"]
                writer.note(round((plan.cut_report.last_ts_us or 0) * 1000), "timeline cut",
                            {k: v for k, v in c.items() if k != "dropped_by_worker"})
            write_tail(writer, tail)
            writer.finish()
        out = _write_json(directory, name, trace["traceEvents"][:n_meta], body, tail, trace["otherData"], gzip)
    return MergeResult(out, pf_out if pftrace else None, trace["otherData"])


def _too_big(what: str) -> str:
    return (f"the JSON timeline {what}: more than a browser can open (about {BROWSER_MAX_EVENTS // 10**6} M events "
            f"or {BROWSER_MAX_BYTES >> 30} GiB). Open {pftrace_name(TIMELINE_NAME)} in https://ui.perfetto.dev "
            "(Open trace file), or cut the JSON: mindspeed-profiler merge DIR --max-spans N / --window START:END")


class _nothing:
    """A context manager that gives None (the .pftrace not asked)."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None


def _pftrace_writer(fh: BinaryIO, plan: TimelinePlan) -> PftraceWriter:
    writer = PftraceWriter(fh)
    writer.thread_name = plan.thread_names  # the plan's own dict: overlap lanes appear in it as found
    writer.process_info = {p["pid"]: {"name": p["name"], "labels": f"host={p['host']} pid={p['os_pid']}",
                                      "sort_index": p["pid"] - 1} for p in plan.info}
    return writer


def _write_pftrace_of(path: pathlib.Path, trace: dict) -> pathlib.Path:
    """The .pftrace of a timeline held in memory (RLinf's alone)."""
    with atomic_path(path) as tmp, open(tmp, "wb") as fh:
        writer = PftraceWriter(fh)
        write_tail(writer, trace.get("traceEvents", []))
        writer.finish()
    return path


def _write_json(directory: pathlib.Path, name: str, meta: list, body: BinaryIO, tail: list, other: dict,
                gzip: bool) -> pathlib.Path:
    """`{"traceEvents": meta + body + tail, "displayTimeUnit": "ms", "otherData": other}`, written
    piece by piece: the bytes orjson.dumps gives for the whole object."""
    def emit(fh: BinaryIO) -> None:
        fh.write(b'{"traceEvents":[')
        sep = b""
        for e in meta:
            fh.write(sep + orjson.dumps(e))
            sep = b","
        if body.tell():   # ",e1,e2,...": the separator is the body's own first byte
            body.seek(0 if sep else 1)
            shutil.copyfileobj(body, fh, 1 << 20)
            sep = b","
        for e in tail:
            fh.write(sep + orjson.dumps(e))
            sep = b","
        fh.write(b'],"displayTimeUnit":"ms","otherData":' + orjson.dumps(other) + b"}")

    out = directory / (name + (".gz" if gzip else ""))
    if gzip:
        with atomic_path(out) as tmp, _gzip.open(tmp, "wb", compresslevel=6) as fh:
            emit(fh)
    else:
        write_atomic(out, emit)
    _remove_stale(out, name, gzip)
    return out


def _remove_stale(out: pathlib.Path, name: str, gzip: bool) -> None:
    stale = out.with_name(name if gzip else name + ".gz")
    if stale.exists():  # never leave an older merge next to the new one (readers take either)
        stale.unlink()


def _read_counters(directory: pathlib.Path) -> dict:
    """(role, rank, iteration) -> [(track name, unit, value)] from the metrics tracker's files of
    this run (run.json's metrics.output_dir, else <profile_save_path>/metrics); {} when none."""
    metrics_dir = directory.parent / formats.METRICS_DIR
    try:
        run = read_json_object(directory.parent / formats.RUN_FILE)   # (None: a TypeError below)
        configured = (run["config"]["profiler_config"].get("metrics") or {}).get("output_dir")
        if isinstance(configured, str) and configured:
            metrics_dir = pathlib.Path(configured)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        pass
    out: dict = {}
    if not metrics_dir.is_dir():
        return out
    for path in sorted(metrics_dir.iterdir()):
        who = formats.parse_metrics_file_name(path.name)
        if who is None or not path.is_file():
            continue
        try:
            lines = path.read_bytes().splitlines()
        except OSError:
            continue
        for line in lines:
            try:
                row = orjson.loads(line)
            except ValueError:
                continue
            if not isinstance(row, dict) or not isinstance(row.get("iteration"), int):
                continue
            values = [(track, unit, row[k]) for k, track, unit in COUNTERS
                      if isinstance(row.get(k), (int, float)) and not isinstance(row.get(k), bool)]
            if values:
                out[(who[0], who[1], row["iteration"])] = values
    return out


def _counter_hook(writer: PftraceWriter, counters: dict, plan: TimelinePlan) -> Callable[[int, int, bytes], None]:
    """At an iteration span's start, the worker's metrics of that iteration (each value holds until
    the next iteration's), found by the span's (role, rank, iteration) args."""
    base = {p["pid"]: {"role": p["role"], "rank": p["rank"]} for p in plan.info}

    def hook(pid: int, ts_ns: int, args: bytes) -> None:
        a = full_args(args, base[pid])
        for track, unit, value in counters.get((a.get("role"), a.get("rank"), a.get("iteration")), ()):
            writer.counter(pid, track, unit, ts_ns, value)
    return hook


def _rlinf_timeline(directory: pathlib.Path) -> dict | None:
    """RLinf's trace_events.jsonl of this directory as our timeline format, or None."""
    path = directory / RLINF_TRACE_FILE
    if not path.is_file():
        return None
    events, warnings = read_rlinf_events(path)
    trace, more = to_timeline(events)
    trace["otherData"]["warnings"] = warnings + more
    return trace


def _write_trace(directory: pathlib.Path, name: str, trace: dict, gzip: bool) -> pathlib.Path:
    """A timeline held in memory (RLinf's alone) as JSON."""
    add_system_tracks(trace, system_dir_of(directory))  # py-spy frames of this run's wrapped workers (system_tracks.py)
    data = orjson.dumps(trace)
    out = directory / (name + (".gz" if gzip else ""))
    if gzip:
        with atomic_path(out) as tmp, _gzip.open(tmp, "wb", compresslevel=6) as fh:
            fh.write(data)
    else:
        write_atomic(out, data)
    _remove_stale(out, name, gzip)
    return out


def read_timeline_file(path: str) -> dict:
    """Read a merged timeline (`.json` or `.json.gz`)."""
    opener = _gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rb") as fh:
        return orjson.loads(fh.read())


def configured_gzip(timeline_dir: str) -> bool | None:
    """`tracer.gzip` of the run that wrote `timeline_dir`, from its run.json (in the directory or
    its parent, the profile_save_path); None when there is no readable run.json."""
    for d in (pathlib.Path(timeline_dir), pathlib.Path(timeline_dir).parent):
        try:
            run = read_json_object(d / formats.RUN_FILE)
            value = run["config"]["profiler_config"]["tracer"]["gzip"]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if isinstance(value, bool):
            return value
    return None
