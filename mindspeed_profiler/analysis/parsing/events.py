"""Columnar table of complete ("X") trace events, built batch by batch from parsed JSON.

Strings (name, cat, pid, tid) are interned to small ints so that every later aggregation is a
numpy operation. Timestamps are kept relative to an integer base (`t0_us`) so that Ascend's string
timestamps ("1704161511420306.491") keep their sub-microsecond digits in float64.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from itertools import compress, count, repeat
from operator import contains, itemgetter

import numpy as np


_MBE = ("M", "B", "E")
_MBEI = ("M", "B", "E", "i", "I")
from .memory_events import MEMORY_EVENT, memory_record  # Kineto's allocator events: kept here as records
from .numbers import float_or_nan
MAX_SPAN_US = 3.2e15   # 100 years in microseconds
_GET6 = itemgetter("name", "cat", "pid", "tid", "ts", "dur")
# torch >= 2.1 writes a collective's message sizes in the args of `record_param_comms` (and, newer,
# of the NCCL kernel): kept per event for analyzers/collective_bandwidth.py. One key marks them.
COMM_ARGS_KEY = "In msg nelems"
COMM_ARG_FIELDS = ("Collective name", "In msg nelems", "Out msg nelems", "Group size", "dtype",
                   "Process Group Name", "Process Group Description", "Process Group Ranks",
                   "In split size", "Out split size")


# times_exact of a dict batch: times numpy and memory_peaks read alike (no bool, text, null), keys
# the Interner keeps as they are (no float or bool: 1, 1.0 and True would share one id)
_NUMBERS = frozenset((int, float))
_KEYS = frozenset((str, int, type(None)))


def _types(values) -> set:
    return set(map(type, values))


class Interner:
    def __init__(self) -> None:
        self.ids: dict = {}
        self.values: list = []

    def ids_of(self, items) -> np.ndarray:
        """int32 ids of `items` (new values appended). Fast path in C: the distinct values via
        dict.fromkeys, then one map over the dict's __getitem__."""
        ids, values = self.ids, self.values
        try:
            distinct = dict.fromkeys(items)
            for v in distinct:
                if v not in ids:
                    ids[v] = len(values)
                    values.append(v)
            if len(distinct) == 1:   # (a batch's pid, cat or task is often one value)
                return np.full(len(items), ids[next(iter(distinct))], dtype=np.int32)
            return np.fromiter(map(ids.__getitem__, items), dtype=np.int32, count=len(items))
        except TypeError:  # unhashable junk (a list as a name): intern its text
            return np.array(self._slow(items), dtype=np.int32)

    def _slow(self, items) -> list[int]:
        ids, values = self.ids, self.values
        out = []
        for v in items:
            try:
                hash(v)
            except TypeError:
                v = str(v)
            i = ids.get(v)
            if i is None:
                i = ids[v] = len(values)
                values.append(v)
            out.append(i)
        return out


def _parse_str_ts(v: str) -> tuple[int, float] | None:
    """'1704161511420306.491' -> (1704161511420306, 0.491) without float64 rounding; signs and
    exponents ('-12.5', '1.7e15') are handled; None when the text is not a finite number."""
    v = v.strip().strip("\t").strip()
    if not v:
        return None
    sign = 1
    body = v
    if body[0] in "+-":
        sign = -1 if body[0] == "-" else 1
        body = body[1:]
    whole, dot, frac = body.partition(".")
    # isascii: str.isdigit() is also true for "²" and other digits int() refuses
    if whole.isascii() and frac.isascii() and whole.isdigit() and (not frac or frac.isdigit()):
        w = int(whole)
        f = float("0." + frac) if frac else 0.0
        if sign < 0:   # -12.5 = -13 + 0.5
            return (-w - 1, 1.0 - f) if f else (-w, 0.0)
        return w, f
    try:
        x = float(v)
    except ValueError:
        return None
    if not np.isfinite(x):
        return None
    w = int(np.floor(x))
    return w, x - w


def _floats(values) -> np.ndarray:
    """float64 array; None and junk become NaN (fast path: numpy converts numbers and None)."""
    try:
        return np.array(values, dtype=np.float64)
    except (TypeError, ValueError):
        return np.array([float_or_nan(v) for v in values], dtype=np.float64)


@dataclass
class EventTable:
    names: Interner = field(default_factory=Interner)
    cats: Interner = field(default_factory=Interner)
    pids: Interner = field(default_factory=Interner)
    tids: Interner = field(default_factory=Interner)
    t0_us: int | None = None
    process_names: dict = field(default_factory=dict)   # raw pid -> name (from "M" events)
    thread_names: dict = field(default_factory=dict)    # (raw pid, raw tid) -> name (torch_npu's lanes)
    n_raw: int = 0
    n_memory: int = 0
    _cols: dict = field(default_factory=lambda: {k: [] for k in ("name", "cat", "pid", "tid", "ts", "dur", "corr", "task")})
    tasks: Interner = field(default_factory=Interner)
    _begin_end: list = field(default_factory=list)
    comm_args: dict = field(default_factory=dict)   # row index -> COMM_ARG_FIELDS present (see Events)
    _n: int = 0                                     # rows added so far (the next row's index)
    # the [memory] events' records (memory_events.py) and how many were unusable: memory_peaks.py
    # reads them from here rather than parse the file again
    memory: list = field(default_factory=list)
    memory_bad: int = 0
    # every row's time came from a typed batch as a number that ts + t0_us gives back exactly:
    # then the rows are the trace's X events with their raw times (what memory_peaks.py needs of
    # the host ops); False after a dict batch (B / E pairs, junk types) or a lossy time
    times_exact: bool = True

    # -- building ---------------------------------------------------------------------------
    def add_batch(self, batch) -> None:
        """A list of event dicts, or a typed_events.ColumnBatch (the same events, decoded typed)."""
        if type(batch) is not list:
            return self._add_columns(batch)
        self.n_raw += len(batch)
        xs = [e for e in batch if type(e) is dict and e.get("ph") == "X"]
        other = [e for e in batch if type(e) is dict and e.get("ph") in _MBEI] if len(xs) < len(batch) else ()
        for e in other:
            ph = e.get("ph")
            if ph == "i" or ph == "I":
                if e.get("name") == MEMORY_EVENT:
                    self.n_memory += 1
                    self._memory_record(memory_record(e.get("ts"), e.get("pid"), e.get("tid"), e.get("args")))
            elif ph == "M":
                kind = e.get("name")
                if kind == "process_name" or kind == "thread_name":
                    args = e.get("args") or {}
                    if isinstance(args, dict):
                        self._name_of(kind, e.get("pid"), e.get("tid"), str(args.get("name", "")))
            else:   # B / E duration events: paired into complete events in finish()
                self._begin_end.append(e)
                self.times_exact = False
        if xs:
            self._add_complete(xs)

    def _add_columns(self, b) -> None:
        """A typed batch: its values are those the dict path reads (typed_events.py)."""
        self.n_raw += b.n_raw
        self.n_memory += b.n_memory
        for r in b.memory:
            self._memory_record(r)
        # pid / tid are ints, strings or None there: hashable, so no _name_of per event
        pn, tn = self.process_names, self.thread_names
        for kind, pid, tid, name in b.names_of:
            if kind == "process_name":
                pn[pid] = name
            else:
                tn[(pid, tid)] = name
        if b.corr:
            if self.times_exact and str in set(map(type, b.x[5])):
                self.times_exact = False    # a text dur: numpy reads it, memory_peaks does not
            self._append(*b.x, b.corr, b.task, b.comm)

    def _memory_record(self, r: tuple | None) -> None:
        if r is None:
            self.memory_bad += 1
        else:
            self.memory.append(r)

    def _name_of(self, kind: str, pid, tid, name: str) -> None:
        try:
            if kind == "process_name":
                self.process_names[pid] = name
            else:
                self.thread_names[(pid, tid)] = name
        except TypeError:  # an unhashable pid / tid
            if kind == "process_name":
                self.process_names[str(pid)] = name
            else:
                self.thread_names[(str(pid), str(tid))] = name

    def _add_complete(self, xs: list) -> None:
        # one pass over the dicts, then columns by transposition (C speed)
        try:   # every key present (Kineto, trace_view): a C-level getter
            name, cat, pid, tid, ts_raw, dur = zip(*map(_GET6, xs))
        except KeyError:
            name, cat, pid, tid, ts_raw, dur = zip(*[
                (e.get("name"), e.get("cat"), e.get("pid"), e.get("tid"), e.get("ts"), e.get("dur")) for e in xs])
        if self.times_exact and not (_types(ts_raw) <= _NUMBERS and _types(dur) <= _NUMBERS
                                     and all(_types(c) <= _KEYS for c in (name, cat, pid, tid))):
            self.times_exact = False
        args = [e.get("args") for e in xs]
        # Kineto links a kernel to its launch by `correlation`, torch_npu's trace_view by `connection_id`
        corr, task = zip(*[((a.get("correlation", a.get("connection_id", -1)), a.get("Task Type"))
                            if type(a) is dict else (-1, None)) for a in args])
        self._append(name, cat, pid, tid, ts_raw, dur, corr, task, self._comm_args_of(args))

    def _append(self, name, cat, pid, tid, ts_raw, dur, corr, task, comm: list) -> None:
        """Rows from raw columns (sequences of the trace's values, one per complete event); `comm`:
        (index in these rows, collective fields) of the events that carry them."""
        if self.t0_us is None:
            self.t0_us = self._base(ts_raw)
        c = self._cols
        c["name"].append(self.names.ids_of(name))
        c["cat"].append(self.cats.ids_of(cat))
        c["pid"].append(self.pids.ids_of(pid))
        c["tid"].append(self.tids.ids_of(tid))
        c["ts"].append(self._rel(ts_raw))
        c["dur"].append(_floats(dur))
        try:
            corr_a = np.array(corr, dtype=np.int64)
        except (TypeError, ValueError, OverflowError):
            corr_a = np.array([x if type(x) is int and -2**63 <= x < 2**63 else -1 for x in corr], dtype=np.int64)
        c["corr"].append(corr_a)
        c["task"].append(self.tasks.ids_of(task))
        for i, fields in comm:
            self.comm_args[self._n + i] = fields
        self._n += len(ts_raw)

    @staticmethod
    def _comm_args_of(args: list) -> list:
        """The collective fields of the few events that carry them: one membership test per event,
        in C (map / compress: no Python frame per event, this is the parse's hot path). A string or
        list arg holding the key passes the test too, hence the dict check on the hits; an arg
        without `in` (None, a number) raises TypeError: the per-event path."""
        try:
            hit = list(compress(count(), map(contains, args, repeat(COMM_ARGS_KEY))))
        except TypeError:
            hit = [i for i, a in enumerate(args) if type(a) is dict and COMM_ARGS_KEY in a]
        return [(i, {k: a[k] for k in COMM_ARG_FIELDS if k in a}) for i in hit if type(a := args[i]) is dict]

    @staticmethod
    def _base(ts_raw) -> int | None:
        """The integer part of the first usable time; None when there is none (then the next batch
        sets the base: rows without a usable time are dropped whatever it is, and the base does not
        depend on where the batches were cut)."""
        for v in ts_raw:
            if isinstance(v, str):
                t = _parse_str_ts(v)
                if t is not None:
                    return t[0]
            elif isinstance(v, (int, float)) and not isinstance(v, bool) and np.isfinite(v):
                return int(v)
        return None

    def _rel(self, ts_raw) -> np.ndarray:
        base = self.t0_us or 0
        try:
            arr = np.array(ts_raw)
        except (TypeError, ValueError):
            arr = np.array(ts_raw, dtype=object)
        if arr.dtype.kind in "iuf" and arr.ndim == 1:
            f = arr.astype(np.float64)
            rel = f - base
            if self.times_exact and not np.array_equal(rel + base, f):
                self.times_exact = False
            return rel
        self.times_exact = False
        # strings (Ascend: "1704161511420306.491", kept exact relative to the base), None, junk
        out = np.empty(len(ts_raw))
        for i, v in enumerate(ts_raw):
            if isinstance(v, str):
                t = _parse_str_ts(v)
                out[i] = np.nan if t is None else (t[0] - base) + t[1]
            else:
                out[i] = float_or_nan(v) - base
        return out

    # -- one file in two parts (split_parse.py) ---------------------------------------------
    _INTERNERS = ("names", "cats", "pids", "tids", "tasks")
    _INTERNED = {"names": "name", "cats": "cat", "pids": "pid", "tids": "tid", "tasks": "task"}

    def part(self) -> dict:
        """What absorb() needs of this table, which holds a later part of a file (picklable)."""
        return {"cols": {k: np.concatenate(v) if v else None for k, v in self._cols.items()},
                "values": {k: getattr(self, k).values for k in self._INTERNERS}, "t0_us": self.t0_us,
                "process_names": self.process_names, "thread_names": self.thread_names, "n_raw": self.n_raw,
                "n_memory": self.n_memory, "memory": self.memory, "memory_bad": self.memory_bad,
                "comm_args": self.comm_args, "n": self._n, "begin_end": self._begin_end,
                "times_exact": self.times_exact}

    def absorb(self, p: dict) -> None:
        """Add the rows of `part()` of a table that read the rest of this file (after this table's
        last byte, with this table's t0_us when it had one): the same table as reading the whole
        file here. Its strings are interned in its first-seen order after ours, which gives the ids
        a single reader would have given them."""
        if self.t0_us is None:
            self.t0_us = p["t0_us"]
        for k in self._INTERNERS:
            interner = getattr(self, k)
            ids, values = interner.ids, interner.values
            remap = np.empty(len(p["values"][k]), dtype=np.int32)
            for j, v in enumerate(p["values"][k]):
                i = ids.get(v)
                if i is None:
                    i = ids[v] = len(values)
                    values.append(v)
                remap[j] = i
            col = p["cols"][self._INTERNED[k]]
            if col is not None:
                self._cols[self._INTERNED[k]].append(remap[col])
        for k in ("ts", "dur", "corr"):
            if p["cols"][k] is not None:
                self._cols[k].append(p["cols"][k])
        for i, fields in p["comm_args"].items():
            self.comm_args[self._n + i] = fields
        self._n += p["n"]
        self.process_names.update(p["process_names"])
        self.thread_names.update(p["thread_names"])
        self.n_raw += p["n_raw"]
        self.n_memory += p["n_memory"]
        self.memory.extend(p["memory"])
        self.memory_bad += p["memory_bad"]
        self._begin_end.extend(p["begin_end"])
        self.times_exact = self.times_exact and p["times_exact"]

    # -- finished columns -------------------------------------------------------------------
    def _pair_begin_end(self) -> int:
        """B/E duration events -> complete events (per pid/tid, a stack in time order, as the
        Chrome trace viewer does); returns how many could not be paired."""
        evs, self._begin_end = self._begin_end, []
        if not evs:
            return 0
        def t(e):
            v = e.get("ts")
            if isinstance(v, str):
                p = _parse_str_ts(v)
                return None if p is None else p
            x = float_or_nan(v)
            return None if not np.isfinite(x) else (int(np.floor(x)), x - np.floor(x))
        threads: dict = {}
        bad = 0
        for k, e in enumerate(evs):
            tt = t(e)
            if tt is None:
                bad += 1
                continue
            key = (str(e.get("pid")), str(e.get("tid")))
            threads.setdefault(key, []).append((tt, k, e))
        xs = []
        for items in threads.values():
            items.sort(key=lambda x: (x[0], x[1]))
            stack: list = []
            for tt, _, e in items:
                if e.get("ph") == "B":
                    stack.append((tt, e))
                elif stack:
                    (tb, b) = stack.pop()
                    args = b.get("args") if isinstance(b.get("args"), dict) else {}
                    if isinstance(e.get("args"), dict) and e["args"]:
                        args = {**args, **e["args"]}
                    xs.append({"ph": "X", "name": b.get("name") if b.get("name") is not None else e.get("name"),
                               "cat": b.get("cat") if b.get("cat") is not None else e.get("cat"),
                               "pid": b.get("pid"), "tid": b.get("tid"), "ts": b.get("ts"),
                               "dur": (tt[0] - tb[0]) + (tt[1] - tb[1]), "args": args})
                else:
                    bad += 1    # an end without a begin
            bad += len(stack)   # begins never ended
        if xs:
            self._add_complete(xs)
        return bad

    def finish(self) -> "Events":
        unpaired = self._pair_begin_end()
        c = self._cols
        def cat(k, dt):
            return np.concatenate(c[k]) if c[k] else np.empty(0, dtype=dt)
        ev = Events(
            name=cat("name", np.int32), cat=cat("cat", np.int32), pid=cat("pid", np.int32),
            tid=cat("tid", np.int32), ts=cat("ts", np.float64), dur=cat("dur", np.float64),
            corr=cat("corr", np.int64), task=cat("task", np.int32),
            names=self.names.values, cats=self.cats.values, pids=self.pids.values,
            tids=self.tids.values, tasks=self.tasks.values, t0_us=self.t0_us or 0,
            process_names=self.process_names, thread_names=self.thread_names, n_raw=self.n_raw,
            n_memory=self.n_memory, comm_args=self.comm_args,
        )
        self._cols = {k: [] for k in c}
        self.comm_args, self._n = {}, 0
        # drop events without a usable time (reported as a count, not silently); a time a century
        # away from the trace's start (a 30-digit ts) is as unusable as none
        ok = np.isfinite(ev.ts) & np.isfinite(ev.dur) & (ev.dur >= 0) & (np.abs(ev.ts) < MAX_SPAN_US) & (ev.dur < MAX_SPAN_US)
        ev.n_bad = int(len(ok) - ok.sum()) + unpaired
        if ev.n_bad:
            ev.select(ok)
        return ev


@dataclass
class Events:
    name: np.ndarray
    cat: np.ndarray
    pid: np.ndarray
    tid: np.ndarray
    ts: np.ndarray
    dur: np.ndarray
    corr: np.ndarray
    task: np.ndarray
    names: list
    cats: list
    pids: list
    tids: list
    tasks: list
    t0_us: int
    process_names: dict
    thread_names: dict = field(default_factory=dict)
    n_raw: int = 0
    n_bad: int = 0
    n_memory: int = 0   # [memory] events in the trace (not kept here)
    # row index -> the collective fields (COMM_ARG_FIELDS, as the trace gave them) of the events
    # whose args carry "In msg nelems"; select() keeps the indices in step with the columns
    comm_args: dict = field(default_factory=dict)

    ARRAYS = ("name", "cat", "pid", "tid", "ts", "dur", "corr", "task")

    def __len__(self) -> int:
        return len(self.ts)

    @property
    def end(self) -> np.ndarray:
        return self.ts + self.dur

    def select(self, mask: np.ndarray) -> None:
        """Keep the rows of a boolean mask (comm_args re-indexed to the kept rows)."""
        for k in self.ARRAYS:
            setattr(self, k, getattr(self, k)[mask])
        if self.comm_args:
            new = np.cumsum(mask) - 1
            self.comm_args = {int(new[i]): v for i, v in self.comm_args.items() if mask[i]}

    def thread_name_of(self) -> np.ndarray:
        """Per event: its thread's name (from "M" thread_name events; "" without one), as an object
        array built once per distinct (pid, tid)."""
        if not len(self):
            return np.empty(0, dtype=object)
        key = self.pid.astype(np.int64) * (len(self.tids) + 1) + self.tid
        uniq, inv = np.unique(key, return_inverse=True)
        names = np.array([str(self.thread_names.get((self.pids[int(k // (len(self.tids) + 1))],
                                                     self.tids[int(k % (len(self.tids) + 1))]), ""))
                          for k in uniq], dtype=object)
        return names[inv]

    def lookup(self, values: list, pred) -> np.ndarray:
        """Boolean lookup table over interned values: pred(value) for each id."""
        return np.array([bool(pred(v)) for v in values], dtype=bool) if values else np.zeros(0, dtype=bool)
