"""Typed decoding of a batch of trace events: only the fields EventTable reads, in C.

`orjson.loads` builds a dict per event with every key and every arg (a kernel carries a dozen:
grid, block, registers per thread...), most of which nothing reads. msgspec decodes straight into
the Structs below (one per phase, tagged by `ph`), skipping the other keys without building them:
~2-2.5x faster than orjson on real Kineto traces (docs/perf_analysis.md, "Past the floor"). The
`[memory]` instant events become records here too (memory_events.py), so that memory_peaks.py
needs no second read of the file.

Results must be those of the dict path (EventTable.add_batch on orjson's dicts), so the types are
strict and anything else makes `BatchDecoder` return None: the caller then parses that batch with
orjson as before. That covers junk types (a number as a name, a list as args, a bool as a time),
a phase not in the union or no `ph`, B / E events (their pairing merges whole args dicts), non-object events, NaN / Infinity (orjson
refuses them too, the lenient path reads them), invalid UTF-8 in a field read, and integers
outside int64, which orjson turns into floats where msgspec would keep an int.
Known difference (docs/perf_analysis.md): a number beyond float64's range (1e400) in a field that
nothing reads is skipped here, where orjson rejects the whole trace.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from itertools import compress, repeat
from operator import attrgetter, contains, is_, is_not, itemgetter
from typing import Annotated, Union

import msgspec
import orjson
from msgspec import UNSET, Meta, Raw, UnsetType

from .events import COMM_ARG_FIELDS, MEMORY_EVENT
from .memory_events import ARG_KEYS as MEMORY_ARG_KEYS

# orjson keeps integers in [-2**63, 2**64) and makes floats of the others; msgspec bounds must fit
# int64, so (2**63, 2**64) falls back too (no real trace has such a pid or time)
Int = Annotated[int, Meta(ge=-(2**63), le=2**63 - 1)]
Num = Int | float | str | None     # str: torch_npu's trace_view writes times as decimal text
# the collective fields: Raw (the value's bytes), decoded by orjson for the few events that have them
_COMM_ATTRS = tuple(f"c{i}" for i in range(len(COMM_ARG_FIELDS)))


# what EventTable reads of an "X" event's `args`; one Raw field per COMM_ARG_FIELDS key (c0
# "Collective name", ...)
Args = msgspec.defstruct("Args", [
    ("correlation", Int | None | UnsetType, UNSET),
    ("connection_id", Int | None, -1),      # dict path: args.get("correlation", args.get("connection_id", -1))
    ("task_type", str | None, msgspec.field(default=None, name="Task Type")),
    *((a, Raw | UnsetType, msgspec.field(default=UNSET, name=k)) for a, k in zip(_COMM_ATTRS, COMM_ARG_FIELDS)),
], frozen=True, gc=False)
NO_ARGS = Args()
# of an "M" event's args: the name (process_name / thread_name events)
MetaArgs = msgspec.defstruct("MetaArgs", [("name", str | None | UnsetType, UNSET)], frozen=True, gc=False)
NO_META = MetaArgs()
# of an "i" / "I" event's args: the [memory] fields (memory_events.ARG_KEYS), typed as
# memory_record takes them (int64 ints, totals also null): another type fails the batch, which
# the dict path then takes, so a record is always that of memory_record
MemArgs = msgspec.defstruct("MemArgs", [
    ("device_type", Int | UnsetType, msgspec.field(default=UNSET, name=MEMORY_ARG_KEYS[0])),
    ("device_id", Int | UnsetType, msgspec.field(default=UNSET, name=MEMORY_ARG_KEYS[1])),
    ("nbytes", Int | UnsetType, msgspec.field(default=UNSET, name=MEMORY_ARG_KEYS[2])),
    ("allocated", Int | None, msgspec.field(default=None, name=MEMORY_ARG_KEYS[3])),
    ("reserved", Int | None, msgspec.field(default=None, name=MEMORY_ARG_KEYS[4])),
], frozen=True, gc=False)
NO_MEM = MemArgs()

# One Struct per phase, tagged by `ph`: each decodes only what EventTable reads of that phase
# (0.3-0.4x of orjson on the real traces against 0.4-0.8x for one Struct for all: flow and metadata
# events skip their other keys). A phase not listed, a missing or non-text ph, fails the batch
# (the dict path takes it: exact, only slower); B / E decode to empty Structs, then columns()
# hands the batch to the dict path, which pairs them.
_BASE = (("name", str | None, None), ("pid", Int | str | None, None), ("tid", Int | str | None, None))


def _phase(ph: str, fields: tuple = (), frozen: bool = False) -> type:
    return msgspec.defstruct(f"Ph{ord(ph)}", list(fields), tag_field="ph", tag=ph, gc=False, frozen=frozen)


XEvent = _phase("X", _BASE + (("cat", str | None, None), ("ts", Num, None), ("dur", Num, None), ("args", Args | None, NO_ARGS)))
MEvent = _phase("M", _BASE + (("args", MetaArgs | None, NO_META),), frozen=True)   # hashable: _meta_names
_INSTANT = tuple(_phase(p, _BASE + (("ts", Num, None), ("args", MemArgs | None, NO_MEM))) for p in "iI")
_BEGIN_END = frozenset(_phase(p) for p in "BE")
# the other phases of the Trace Event Format (flows, async, counters, samples, objects, marks...)
_OTHER = tuple(_phase(p) for p in "sftbneCPNODRc()")
Event = Union[(XEvent, MEvent, *_INSTANT, *_BEGIN_END, *_OTHER)]


@dataclass
class ColumnBatch:
    """One batch's events as EventTable takes them (the raw values, in file order)."""
    n_raw: int
    n_memory: int = 0
    names_of: list = field(default_factory=list)      # ("process_name" | "thread_name", pid, tid, name)
    x: tuple = ((), (), (), (), (), ())                # name, cat, pid, tid, ts, dur of the "X" events
    corr: list = field(default_factory=list)
    task: list = field(default_factory=list)
    comm: list = field(default_factory=list)           # (index among the X events, {COMM field: value})
    memory: list = field(default_factory=list)         # memory_events.memory_record of each [memory] event


_DECODER = msgspec.json.Decoder(list[Event])
_INSTANT_TYPES = frozenset(_INSTANT)
# one pass per field: 2x faster than one 7-tuple per event transposed by zip (issue 34: 23 against
# 54 ms on the MTIA trace's 138k X events)
_X_FIELDS = tuple(map(attrgetter, ("name", "cat", "pid", "tid", "ts", "dur")))
_ARGS = attrgetter("args")
_COMM_KEY = attrgetter(_COMM_ATTRS[COMM_ARG_FIELDS.index("In msg nelems")])
_COMM_ALL = attrgetter(*_COMM_ATTRS)
_NAMED = frozenset(("process_name", "thread_name"))
_NAME = attrgetter("name")
_META_FIELDS = attrgetter("name", "pid", "tid", "args")
# after this many batches in a row that the typed path could not take, a file is read as dicts
MAX_MISSES = 8


class BatchDecoder:
    """Per file: bytes of a JSON array of events -> ColumnBatch, or None (parse it as dicts)."""

    def __init__(self) -> None:
        self.misses = 0
        self.typed = 0      # batches decoded here (tests check the path taken)

    def __call__(self, data: bytes) -> ColumnBatch | None:
        if self.misses >= MAX_MISSES:
            return None
        try:
            out = columns(_DECODER.decode(data))
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError, orjson.JSONDecodeError):
            out = None
        if out is None:
            self.misses += 1
        else:
            self.misses = 0
            self.typed += 1
        return out


def columns(evs: list) -> ColumnBatch | None:
    """The decoded events as columns; None where the dict path must decide (B / E events)."""
    out = ColumnBatch(len(evs))
    phs = list(map(type, evs))      # the Struct type is the phase
    kinds = set(phs)
    if not kinds.isdisjoint(_BEGIN_END):
        return None
    if kinds != {XEvent}:
        if not kinds.isdisjoint(_INSTANT_TYPES):
            mem = [e for e in compress(evs, map(contains, repeat(_INSTANT_TYPES), phs)) if e.name == MEMORY_EVENT]
            out.n_memory = len(mem)
            out.memory = list(map(_memory_record, mem))
        if MEvent in kinds:
            out.names_of = _meta_names(list(compress(evs, map(is_, phs, repeat(MEvent)))))
        xs = list(compress(evs, map(is_, phs, repeat(XEvent))))
    else:
        xs = evs
    if not xs:
        return out
    out.x = tuple(list(map(g, xs)) for g in _X_FIELDS)
    args = list(map(_ARGS, xs))
    if None in args:    # "args": null (the dict path gives those -1 and no task)
        out.corr = [-1 if a is None else a.connection_id if a.correlation is UNSET else a.correlation for a in args]
        out.task = [None if a is None else a.task_type for a in args]
        present = [a is not None and _COMM_KEY(a) is not UNSET for a in args]
    else:
        out.corr = [a.connection_id if a.correlation is UNSET else a.correlation for a in args]
        out.task = [a.task_type for a in args]
        present = list(map(is_not, map(_COMM_KEY, args), repeat(UNSET)))
    if any(present):
        for i in compress(range(len(args)), present):
            raw = _COMM_ALL(args[i])
            out.comm.append((i, {k: orjson.loads(bytes(r)) for k, r in zip(COMM_ARG_FIELDS, raw) if r is not UNSET}))
    return out


def _meta_names(ms: list) -> list:
    """(kind, pid, tid, name) of the process_name / thread_name events among the "M" events `ms`, in
    file order (EventTable sets them in turn: each key's last name, each key where it came first).
    A batch's repeats are read once where that changes nothing, each key named one way in the batch:
    a trace may repeat its metadata (HTA's MTIA trace: 310k "M" events for 10 threads, 2/3 of its
    events), and the distinct events are found in C (MEvent is frozen: hashable)."""
    distinct = list(dict.fromkeys(ms))   # (every field of a decoded "M" event is hashable)
    if len(distinct) == len(ms):
        return _names_of(ms)
    out = _names_of(distinct)
    keys = [(k, p) if k == "process_name" else (k, p, t) for k, p, t, _ in out]
    if len(set(keys)) == len(set(zip(keys, map(itemgetter(3), out)))):
        return out
    return _names_of(ms)   # a key named two ways: every event, in order


def _names_of(ms: list) -> list:
    """(kind, pid, tid, name) of each process_name / thread_name event among `ms`, in order."""
    named = list(compress(ms, map(contains, repeat(_NAMED), map(_NAME, ms))))
    if not named:
        return []
    kind, pid, tid, args = zip(*map(_META_FIELDS, named))
    if None in args or UNSET in map(_NAME, args):
        name = list(map(_meta_name, args))
    else:   # every one has a name (Kineto writes one): str() only for a null
        name = [n if type(n) is str else str(n) for n in map(_NAME, args)]
    return list(zip(kind, pid, tid, name))


def _memory_record(e) -> tuple | None:
    """memory_events.memory_record of a typed [memory] event (its types already those it accepts)."""
    a, ts = e.args, e.ts
    if (a is None or a is NO_MEM or ts is None or type(ts) is str or a.device_type is UNSET
            or a.device_id is UNSET or a.nbytes is UNSET):
        return None      # no args object (absent: NO_MEM; an empty one is a new MemArgs), time or field
    ta, tr = a.allocated, a.reserved
    if (ta is not None and ta < 0) or (tr is not None and tr < 0):
        return None
    return float(ts), str(e.pid), str(e.tid), a.device_type, a.device_id, a.nbytes, ta, tr


def _meta_name(a: MetaArgs | None) -> str:
    """str(args.get("name", "")) of an "M" event, args None or empty meaning {} as in the dict path."""
    if a is None or a.name is UNSET:
        return ""
    return str(a.name)
