"""The merge of one run's segment sessions as a stream: `plan_timeline` works out everything that
needs the whole picture from small per-session facts (processes, names, lanes, clock offsets, the
time origin, stats, warnings); `TimelinePlan.batches()` then gives the events in timeline order,
a batch at a time, by a k-way merge (a heap of the sessions' sorted runs), never holding them all:
each batch as its Chrome trace JSON and as items for the protobuf writer (pftrace.py).

The order is the old in-memory merge's exactly: (ts, longest first), ties in (process, session,
event) order, so the JSON written from this stream is byte-equal to it. Crossing spans move to an
"(overlap)" lane as before; the lane's thread_name is appended to `meta` when first needed.
"""
from __future__ import annotations

import heapq
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterator, Optional

import orjson

from mindspeed_profiler.core import formats

from mindspeed_profiler.analysis.parsing.numbers import int_or
from mindspeed_profiler.analysis.timeline.spill import SessionEvents, in_memory

TASK_TID_BASE = 5_000_000  # above Linux pid_max (2**22): synthetic lanes never collide with real tids
OVERLAP_TID_BASE = 9_000_000
ANY_RUN = object()  # every session, whatever its run
BATCH_EVENTS = 4096   # events per batch: the writers' work comes in lists of this many
_DUR, _CLOSE, _INSTANT = b',"dur":', b"}", b',"s":"t"}'


@dataclass
class Cut:
    """What the user asked to keep: spans overlapping [start_s, end_s) (seconds since the
    timeline's origin; None = open), then the first `max_spans` of them in time order."""

    max_spans: Optional[int] = None
    start_s: Optional[float] = None
    end_s: Optional[float] = None

    def active(self) -> bool:
        return self.max_spans is not None or self.start_s is not None or self.end_s is not None


@dataclass
class _Proc:
    key: tuple
    role: str
    rank: int
    host: str
    os_pid: int
    sessions: list = field(default_factory=list)  # (path, Session)


@dataclass
class _Source:
    """One session on the timeline: where its events go and how its clock maps."""

    pid: int
    lane_tid: dict
    base_args: dict
    shift: int           # mono ns -> reference-clock unix ns
    events: SessionEvents


@dataclass
class CutReport:
    total: int = 0
    kept: int = 0
    dropped_by_pid: dict = field(default_factory=dict)
    first_ts_us: Optional[float] = None
    last_ts_us: Optional[float] = None


def run_of(sess: Any) -> str | None:
    rid = sess.header.get(formats.RUN_ID_KEY)
    return rid if isinstance(rid, str) else None


def runs_of(sessions: list) -> list[str | None]:
    """The run ids of the sessions, the latest run last (by its first session's start)."""
    first: dict = {}
    for _path, sess in sessions:
        rid = run_of(sess)
        start = int(sess.header["clock"].get("wall_ns") or 0) if isinstance(sess.header.get("clock"), dict) else 0
        first[rid] = min(first.get(rid, start), start)
    return sorted(first, key=lambda r: (first[r], str(r)))


@dataclass
class TimelinePlan:
    """Everything of a merged timeline but its events; `events()` streams those."""

    meta: list
    info: list
    warnings: list
    origin: int
    run_id: Any
    runs: list
    sources: list
    thread_names: dict = field(default_factory=dict)  # (pid, tid) -> name, overlap lanes included
    cut: Cut = field(default_factory=Cut)
    cut_report: Optional[CutReport] = None

    @property
    def n_events(self) -> int:
        return sum(s.events.n for s in self.sources)

    def other_data(self) -> dict:
        other = {
            "generator": "mindspeed-profiler merge",
            "schema": formats.SEGMENT_SCHEMA,
            "time_origin_unix_ns": self.origin,
            "time_base": "ts = microseconds since time_origin_unix_ns, on the reference (driver) clock",
            "processes": self.info,
            "warnings": self.warnings,
            formats.RUN_ID_KEY: None if self.run_id is ANY_RUN else self.run_id,
            "runs": self.runs,
        }
        if self.cut_report is not None:
            other["cut"] = self._cut_summary()
        return other

    def batches(self, slices: bool = True, size: int = BATCH_EVENTS) -> Iterator[tuple[bytes, list]]:
        """The merged events in timeline order, `size` at a time (a single pass: call once), each
        batch as (its Chrome trace events' JSON, each one led by a comma; the protobuf writer's
        items `((pid, tid), pid, ts_ns, dur_ns or None, tag, args, outermost)` when `slices`).

        One loop does the k-way merge, the cut, the overlap lanes and both encodings: at 20 M
        events every function call and every dict per event shows, so none is made here. The
        JSON is assembled from pieces (the record's head and args, orjson's floats, the lane's
        pid / tid / role / rank) to the bytes orjson.dumps gives for the event's dict."""
        origin, sources = self.origin, self.sources
        heap: list = []
        deltas, lanes_of = [], []
        stacks: dict[tuple, list] = {}
        for k, src in enumerate(sources):
            deltas.append(src.shift - origin)
            lanes_of.append(self._lanes(src, stacks))
            for run in src.events.runs:
                nxt = iter(run()).__next__
                try:
                    rec = nxt()
                except StopIteration:  # an empty session read into memory
                    continue
                # [ns since the origin, -duration, order, record, next, source]: `order` (session,
                # run) settles equal times, so the merge keeps file order among them (as the old
                # stable sort did) and never compares the records
                heap.append([rec[0] + deltas[k], rec[1], len(heap), rec, nxt, k])
        heapq.heapify(heap)
        extra: dict[tuple, int] = {}
        cut, report = self.cut, (CutReport(total=self.n_events) if self.cut.active() else None)
        lo = None if cut.start_s is None else cut.start_s * 1e6
        hi = None if cut.end_s is None else cut.end_s * 1e6
        max_spans = cut.max_spans
        kept_by_pid: dict = {}
        heapreplace, heappop = heapq.heapreplace, heapq.heappop
        # the batch's JSON in columns, joined by _json_batch: head, ts, pid..role/rank, args, dur
        heads: list = []
        floats: list = []
        mids: list = []
        argl: list = []
        instants: list = []
        pf: list = []
        hadd, fadd, madd, aadd, pfadd = heads.append, floats.append, mids.append, argl.append, pf.append
        while heap:
            s = heap[0]
            rel, negd, rec, k = s[0], s[1], s[3], s[5]
            try:
                nrec = s[4]()
                s[0] = nrec[0] + deltas[k]
                s[1] = nrec[1]
                s[3] = nrec
                heapreplace(heap, s)
            except StopIteration:
                heappop(heap)
            _start, _negd, lane, tag, args = rec
            ts = rel / 1000.0
            pid, tid, mid_rr, mid, stack, key = lanes_of[k][lane]
            span = tag[1]
            if span:
                dur = -negd
                durf = dur / 1000.0
            if report is not None:
                if report.kept == max_spans:
                    break
                end = ts + durf if span else ts
                if (hi is not None and ts >= hi) or (lo is not None and end < lo):
                    continue
                report.kept += 1
                kept_by_pid[pid] = kept_by_pid.get(pid, 0) + 1
                if report.first_ts_us is None:
                    report.first_ts_us = ts
                report.last_ts_us = ts
            if span:
                # a span that crosses (not nests in) an earlier span of its lane goes to an extra
                # lane: trace_begin/trace_end pairs that are not LIFO (Perfetto would drop them)
                end = ts + durf
                while stack and stack[-1] <= ts:
                    stack.pop()
                if stack and end > stack[-1] + 1e-6:
                    if key not in extra:
                        extra[key] = OVERLAP_TID_BASE + len(extra) + 1
                        name = f"tid {tid} (overlap)"
                        self.meta.append(_m("thread_name", pid, extra[key], {"name": name}))
                        self.thread_names[(pid, extra[key])] = name
                    tid = extra[key]
                    key = (pid, tid)
                    mid_rr, mid = _mids(pid, tid, sources[k].base_args)
                    top = False
                else:
                    stack.append(end)
                    top = len(stack) == 1
                fadd(ts)
                fadd(durf)
                if slices:
                    pfadd((key, pid, rel, dur, tag, args, top))
            else:
                instants.append(len(heads))
                fadd(ts)
                fadd(0.0)
                if slices:
                    pfadd((key, pid, rel, None, tag, args, False))
            hadd(tag[0])
            madd(mid if args[0] == 123 else mid_rr)
            aadd(args)
            if len(heads) >= size:
                yield _json_batch(heads, floats, mids, argl, instants), pf
                for col in (heads, floats, mids, argl, instants):
                    col.clear()
                pf = []
                pfadd = pf.append
        if heads:
            yield _json_batch(heads, floats, mids, argl, instants), pf
        if report is not None:
            per_pid: dict = {}
            for s in self.sources:
                per_pid[s.pid] = per_pid.get(s.pid, 0) + s.events.n
            report.dropped_by_pid = {p: n - kept_by_pid.get(p, 0) for p, n in per_pid.items() if n - kept_by_pid.get(p, 0)}
            self.cut_report = report
            self.warnings.append(self._cut_warning())

    def events(self) -> list[dict]:
        """Every merged event as a Chrome trace dict (in memory: the streaming writer uses batches)."""
        body = b"".join(chunk for chunk, _ in self.batches(slices=False))
        return orjson.loads(b"[" + body[1:] + b"]")

    @staticmethod
    def _lanes(src: _Source, stacks: dict) -> dict:
        """lane -> (pid, tid, JSON from pid to the args' role and rank, the same to `"args":`, the
        lane's stack of open span ends (shared by the sessions of one thread), its key)."""
        out = {}
        for lane, tid in src.lane_tid.items():
            key = (src.pid, tid)
            out[lane] = (src.pid, tid, *_mids(src.pid, tid, src.base_args), stacks.setdefault(key, []), key)
        return out

    def _names(self) -> dict:
        return {p["pid"]: p["name"] for p in self.info}

    def _cut_summary(self) -> dict:
        r, names = self.cut_report, self._names()
        return {"max_spans": self.cut.max_spans, "window_s": [self.cut.start_s, self.cut.end_s],
                "events_total": r.total, "events_kept": r.kept, "events_dropped": r.total - r.kept,
                "kept_s": [None if r.first_ts_us is None else r.first_ts_us / 1e6,
                           None if r.last_ts_us is None else r.last_ts_us / 1e6],
                "dropped_by_worker": {names.get(p, str(p)): n for p, n in sorted(r.dropped_by_pid.items())}}

    def _cut_warning(self) -> str:
        s = self._cut_summary()
        asked = ", ".join(x for x in (
            f"--max-spans {self.cut.max_spans}" if self.cut.max_spans is not None else "",
            f"--window {_fmt(self.cut.start_s)}:{_fmt(self.cut.end_s)}"
            if self.cut.start_s is not None or self.cut.end_s is not None else "") if x)
        workers = ", ".join(f"{w} {n}" for w, n in list(s["dropped_by_worker"].items())[:8])
        more = len(s["dropped_by_worker"]) - 8
        kept = "" if s["kept_s"][0] is None else f" (spans starting {s['kept_s'][0]:.3f} s to {s['kept_s'][1]:.3f} s)"
        return (f"timeline cut ({asked}): kept {s['events_kept']} of {s['events_total']} events{kept}, dropped "
                f"{s['events_dropped']}" + (f": {workers}" + (f" and {more} more workers" if more > 0 else "")
                                            if workers else ""))


def _fmt(v: Optional[float]) -> str:
    return "" if v is None else f"{v:g}"


def _json_batch(heads: list, floats: list, mids: list, argl: list, instants: list) -> bytes:
    """The JSON of a batch of events from its columns: `head ts mid args ,"dur": dur }` a span,
    `head ts mid args ,"s":"t"}` an instant (its dummy dur dropped). The floats go through one
    orjson.dumps (the same text as one by one: one serializer), not two calls per event."""
    n = len(heads)
    text = orjson.dumps(floats)[1:-1].split(b",")
    flat = [_DUR] * (7 * n)
    flat[0::7] = heads
    flat[1::7] = text[0::2]
    flat[2::7] = mids
    flat[3::7] = argl
    flat[5::7] = text[1::2]
    flat[6::7] = [_CLOSE] * n
    for i in instants:
        flat[7 * i + 4: 7 * i + 7] = (_INSTANT, b"", b"")
    return b"".join(flat)


def _mids(pid: int, tid: int, base_args: dict) -> tuple[bytes, bytes]:
    """The JSON between an event's ts and its args' own keys: with the process's role and rank
    opening the args object (the args' text follows), and without (the args say role or rank)."""
    mid = b',"pid":%d,"tid":%d,"args":' % (pid, tid)
    return mid + b'{"role":' + orjson.dumps(base_args["role"]) + b',"rank":' + orjson.dumps(base_args["rank"]), mid


def full_args(args: bytes, base_args: dict) -> dict:
    """An event's args dict (as in its JSON) from its record's args text and its process's role / rank."""
    if args[:1] == b"{":
        return orjson.loads(args)
    return {**base_args, **orjson.loads(b"{" + args[1:])} if args[:1] == b"," else dict(base_args)


def _m(name: str, pid: int, tid: int, args: dict) -> dict:
    return {"ph": "M", "name": name, "pid": pid, "tid": tid, "args": args}


def _process_names(procs: list) -> list[str]:
    base = ["driver" if p.role == "driver" and p.rank == 0 else f"{p.role}:{p.rank}" for p in procs]
    counts = Counter(base)   # one pass: a count per name was quadratic (4.8 s of a 20,000-segment merge)
    return [b if counts[b] == 1 else f"{b} (pid {p.os_pid}@{p.host})" for b, p in zip(base, procs)]


def plan_timeline(sessions: list, warnings: list, run_id: Any = None, events: dict | None = None,
                  where: str = "") -> TimelinePlan:
    """The plan of one run's timeline from `sessions` [(path, Session)]: `run_id`, the latest run
    when None, `ANY_RUN` for all. `events` maps id(Session) to its SessionEvents (a scan); without
    it, each session's own `events` list is used."""
    runs = runs_of(sessions)
    if run_id is None:
        run_id = runs[-1] if runs else None
    elif run_id is not ANY_RUN and run_id not in runs:
        raise ValueError(f"no segments of run {run_id!r} in {where} (runs there: {', '.join(map(str, runs))})")
    warnings = list(warnings)
    if len(runs) > 1 and run_id is not ANY_RUN:
        warnings.append(f"the directory holds segments of {len(runs)} runs ({', '.join(map(str, runs))}): "
                        f"this timeline is run {run_id}'s only")
    procs: dict[tuple, _Proc] = {}
    for path, sess in sessions:
        if run_id is not ANY_RUN and run_of(sess) != run_id:
            continue
        h = sess.header
        key = (h.get("host"), h.get("pid"), h.get("role"), h.get("rank"))
        proc = procs.get(key)
        if proc is None:
            proc = procs[key] = _Proc(key, str(h.get("role")), int_or(h.get("rank")), str(h.get("host")), int_or(h.get("pid")))
        proc.sessions.append((path, sess))
    ordered = sorted(procs.values(), key=lambda p: (p.role != "driver", p.role, p.rank, p.host, p.os_pid))
    names = _process_names(ordered)
    plan = TimelinePlan(meta=[], info=[], warnings=warnings, origin=0, run_id=run_id, runs=runs, sources=[])
    for idx, proc in enumerate(ordered):
        pid = idx + 1
        plan.meta.append(_m("process_name", pid, 0, {"name": names[idx]}))
        plan.meta.append(_m("process_sort_index", pid, 0, {"sort_index": idx}))
        plan.meta.append(_m("process_labels", pid, 0, {"labels": f"host={proc.host} pid={proc.os_pid}"}))
        threads: dict[int, str] = {}
        stats = _add_sources(plan, proc, pid, threads, events)
        for tid, tname in sorted(threads.items()):
            plan.meta.append(_m("thread_name", pid, tid, {"name": tname}))
            plan.thread_names[(pid, tid)] = tname
        plan.info.append({"pid": pid, "name": names[idx], "role": proc.role, "rank": proc.rank, "host": proc.host,
                          "os_pid": proc.os_pid, **stats})
        if stats["dropped"]:
            warnings.append(f"{names[idx]}: the tracer dropped {stats['dropped']} span(s) (buffer full or write failure)")
    starts = [s.shift + s.events.min_start for s in plan.sources if s.events.min_start is not None]
    plan.origin = min(starts, default=0)
    return plan


def _add_sources(plan: TimelinePlan, proc: _Proc, pid: int, threads: dict, events: dict | None) -> dict:
    """This process's sessions as sources of the plan (lanes mapped to tids); returns its stats."""
    n = dropped = 0
    offset = unc = None
    closed = False
    task_tids: dict[tuple, int] = {}
    for _path, sess in proc.sessions:
        h = sess.header
        clock = sess.clock or {}
        off = int(clock.get("offset_ns", h.get("offset_ns", 0)) or 0)
        offset, unc = off, clock.get("uncertainty_ns", unc)
        wall, mono = int(h["clock"]["wall_ns"]), int(h["clock"]["mono_ns"])
        lane_tid: dict[Any, int] = {}
        for lane, rec in sess.threads.items():
            tid = int_or(rec.get("tid"))
            tname = str(rec.get("name") or f"thread-{tid}")
            if rec.get("task"):
                tkey = (tid, rec["task"])
                if tkey not in task_tids:
                    task_tids[tkey] = TASK_TID_BASE + len(task_tids) + 1
                tid, tname = task_tids[tkey], f"{tname} / {rec['task']}"
            lane_tid[lane] = tid
            threads.setdefault(tid, tname)
        sev = events[id(sess)] if events is not None else in_memory(sess)
        for lane in sev.lanes:  # lanes without a thread record keep their number
            if lane not in lane_tid:
                tid = lane if isinstance(lane, int) else 0
                lane_tid[lane] = tid
                threads.setdefault(tid, f"lane-{tid}")
        plan.sources.append(_Source(pid, lane_tid, {"role": proc.role, "rank": proc.rank}, wall - mono + off, sev))
        n += sev.n
        if sess.stats:
            dropped += int(sess.stats.get("dropped", 0) or 0)
        closed = sess.closed
    return {"events": n, "dropped": dropped, "offset_ns": offset or 0, "uncertainty_ns": unc, "synced": unc is not None,
            "closed": closed}
