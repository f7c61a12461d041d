"""The merged timeline as Perfetto's native protobuf trace (`timeline.pftrace`), written packet by
packet as the merge streams, with our own minimal protobuf encoder (standard library only: the
on-disk contract needs no protobuf package).

Layout (field numbers from Perfetto's protos/perfetto/trace/perfetto_trace.proto):
  Trace { repeated TracePacket packet = 1 }, every packet on one sequence
  (trusted_packet_sequence_id = 10); the first clears the incremental state (sequence_flags = 13:
  SEQ_INCREMENTAL_STATE_CLEARED), every packet that uses interned names says it needs it
  (SEQ_NEEDS_INCREMENTAL_STATE; slice ends use none). Track uuids are small, handed out in order.
  - a TrackDescriptor (60) per worker: uuid, ProcessDescriptor {pid = the JSON pid, process_name,
    process_labels, legacy_sort_index}; one per thread lane: parent_uuid, ThreadDescriptor
    {pid, tid, thread_name}; counter tracks (CounterDescriptor) under their worker.
  - a TrackEvent (11) per span: TYPE_SLICE_BEGIN at its start, TYPE_SLICE_END at its end (emitted
    in time order from a heap of open slices), name_iid / category_iids interned in InternedData
    (12: event_names = 2, event_categories = 1, debug_annotation_names = 3, and string arg values:
    debug_annotation_string_values = 29) the first time they occur, the span's args (role and rank aside: the track says them) as debug_annotations (4);
    instants are TYPE_INSTANT, counters TYPE_COUNTER with double_counter_value (44) (a tail `C`
    event: a counter track "<name> <arg>" per arg, the name Perfetto's JSON import gives it).
  - flows: an `rpc` span's begin carries flow_ids (47), the worker span it caused carries
    terminating_flow_ids (48). The tracer records no call ids, so the link is inferred (see
    `FlowLinker`): the outermost span of each other worker that starts inside the rpc span, the
    innermost rpc span when several hold it.
Timestamps: ns since the JSON timeline's origin (its `ts` x 1000), exact (from the segments' ns).
"""
from __future__ import annotations

import heapq
import json
import struct
from collections import deque
from typing import Any, BinaryIO, Callable, Iterable, Optional

import orjson

from mindspeed_profiler.core import formats

SEQ_ID = 1
SEQ_INCREMENTAL_STATE_CLEARED, SEQ_NEEDS_INCREMENTAL_STATE = 1, 2
TYPE_SLICE_BEGIN, TYPE_SLICE_END, TYPE_INSTANT, TYPE_COUNTER = 1, 2, 3, 4
MAX_CROSSING = 128            # extra tracks per lane for slices that cross (beyond: the last one)
MAX_INTERNED = 100_000        # distinct names interned; beyond, names are written inline
HOLD_LIMIT_BYTES = 64 << 20   # packets held back while an rpc span's flows are still open
_MASK64 = (1 << 64) - 1
_SMALL = [bytes([i]) for i in range(128)] + [bytes([(i & 0x7F) | 0x80, i >> 7]) for i in range(128, 1 << 14)]
_LOW14 = [bytes([(i & 0x7F) | 0x80, (i >> 7) | 0x80]) for i in range(1 << 14)]  # 14 low bits, more to come
ANNOTATION_CACHE = 50_000     # encoded (arg name, value) pairs kept: stage names, iterations, ...
BLOCK_CACHE = 100_000         # encoded args objects (all of a span's annotations) kept, by their JSON
_OUT_PIECES = 4096            # packets gathered before one write


# ---------------------------------------------------------------------------------- the encoder


def varint(v: int) -> bytes:
    """Base-128 varint; a negative int64 as its 64-bit two's complement (10 bytes), as protobuf does.
    14 bits at a time from tables: timestamps (~40 bits) are 3 lookups, not a 6-step loop."""
    if 0 <= v < 16384:
        return _SMALL[v]
    if 0 < v < 1 << 28:
        return _LOW14[v & 0x3FFF] + _SMALL[v >> 14]
    if 0 < v < 1 << 42:
        return _LOW14[v & 0x3FFF] + _LOW14[(v >> 14) & 0x3FFF] + _SMALL[v >> 28]
    if 0 < v < 1 << 56:
        return _LOW14[v & 0x3FFF] + _LOW14[(v >> 14) & 0x3FFF] + _LOW14[(v >> 28) & 0x3FFF] + _SMALL[v >> 42]
    v &= _MASK64
    out = bytearray()
    while v > 0x7F:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def key(field: int, wire: int) -> bytes:
    return varint(field << 3 | wire)


def f_varint(field: int, v: int) -> bytes:
    return key(field, 0) + varint(v)


def f_bytes(field: int, data: bytes) -> bytes:
    return key(field, 2) + varint(len(data)) + data


def f_str(field: int, s: str) -> bytes:
    return f_bytes(field, s.encode("utf-8", "surrogatepass"))


def f_double(field: int, v: float) -> bytes:
    return key(field, 1) + struct.pack("<d", v)


def f_fixed64(field: int, v: int) -> bytes:
    return key(field, 1) + struct.pack("<Q", v & _MASK64)


_PACKET = key(1, 2)                                   # Trace.packet
_TS = key(8, 0)                                       # TracePacket.timestamp
_TRACK_EVENT = key(11, 2)
_SEQ_TAIL = f_varint(10, SEQ_ID) + f_varint(13, SEQ_NEEDS_INCREMENTAL_STATE)
_SEQ_ONLY = f_varint(10, SEQ_ID)
_BEGIN, _INSTANT = f_varint(9, TYPE_SLICE_BEGIN), f_varint(9, TYPE_INSTANT)
_TYPE_LEN = len(_BEGIN)                               # == len(_INSTANT)


def packet(body: bytes) -> bytes:
    return _PACKET + varint(len(body)) + body


def _annotation_value(v: Any) -> bytes:
    """A DebugAnnotation's value field for one arg value."""
    if isinstance(v, bool):
        return f_varint(2, int(v))
    if isinstance(v, int):
        return f_varint(4, v) if -2**63 <= v < 2**63 else f_str(6, str(v))
    if isinstance(v, float):
        return f_double(5, v)
    if isinstance(v, str):
        return f_str(6, v)
    return f_str(9, json.dumps(v, default=repr, separators=(",", ":"), ensure_ascii=False))  # legacy_json_value: None, lists, dicts


# ---------------------------------------------------------------------------------- flows


class _Held:
    """An rpc span's begin packet, held until the spans it caused are known (its flow ids)."""

    __slots__ = ("ts", "te", "tail", "end_ns", "pid", "flows", "linked", "sealed", "open")

    def __init__(self, ts: bytes, te: bytes, tail: bytes, end_ns: int, pid: int):
        self.ts, self.te, self.tail, self.end_ns, self.pid = ts, te, tail, end_ns, pid
        self.flows: list[int] = []
        self.linked: set = set()
        self.sealed = False
        self.open = False   # in FlowLinker.open: may still get flows, so held back

    def encode(self) -> bytes:
        te = self.te + b"".join(f_fixed64(47, f) for f in self.flows)
        return packet(self.ts + _TRACK_EVENT + varint(len(te)) + te + self.tail)


class FlowLinker:
    """Which rpc span caused a span: the innermost open rpc span of another worker holding its start;
    only a worker's outermost spans, and one span per (rpc span, worker)."""

    def __init__(self) -> None:
        self.open: list[_Held] = []   # in start order
        self.next_id = 1
        self.n_flows = 0
        self.min_end = 1 << 63        # the earliest end among `open`: nothing to close before it

    def add(self, held: _Held) -> None:
        held.open = True
        self.open.append(held)
        self.min_end = min(self.min_end, held.end_ns)

    def close_before(self, ts_ns: int) -> bool:
        """Close the rpc spans that ended before `ts_ns` (and the sealed ones); True if any."""
        if ts_ns <= self.min_end:
            return False
        keep = []
        for h in self.open:
            if h.end_ns >= ts_ns and not h.sealed:
                keep.append(h)
            else:
                h.open = False
        self.open = keep
        self.min_end = min((h.end_ns for h in keep), default=1 << 63)
        return True

    def link(self, pid: int) -> Optional[int]:
        for h in reversed(self.open):
            if h.pid != pid:
                if pid in h.linked:
                    return None
                h.linked.add(pid)
                fid = self.next_id
                self.next_id += 1
                h.flows.append(fid)
                self.n_flows += 1
                return fid
        return None


# ---------------------------------------------------------------------------------- the writer


class PftraceWriter:
    """Writes TracePackets to `fh` as events come, in time order (see the module docstring).

    `slices` is the merge's path (a batch of events, every per-event step inlined, encodings cached
    per name / category and per args object); `slice` the general one (tail events, notes). Both
    write the same bytes for the same event."""

    def __init__(self, fh: BinaryIO):
        self._fh = fh
        self._names: dict[str, bytes] = {}         # name -> its encoded name_iid field
        self._cats: dict[str, bytes] = {}
        self._arg_names: dict[str, int] = {}
        self._str_values: dict[str, int] = {}      # debug_annotation_string_values
        self._ann: dict[tuple, bytes] = {}         # (name, type, value) -> encoded debug_annotations field
        self._tags: dict[bytes, tuple] = {}        # record tag's head -> (name + category fields, is rpc, is iteration)
        self._blocks: dict[bytes, bytes] = {}      # args JSON -> all its debug_annotations fields
        self._tracks: dict[tuple, int] = {}        # (pid, tid) -> uuid
        self._proc_tracks: dict[int, int] = {}     # pid -> uuid
        self._last_uuid = 0                        # uuids are handed out in order: 1-3 byte varints
        self._counters: dict[tuple, int] = {}      # (pid, name) -> uuid
        self._end_te: dict[int, bytes] = {}        # uuid -> the encoded end TrackEvent
        self._end_tail: dict[int, bytes] = {}      # uuid -> the end TrackEvent and the sequence id
        self._open_ends: dict[int, list] = {}      # uuid -> ends of its open slices (a stack)
        self._uuid_f: dict[int, bytes] = {}        # uuid -> its encoded track_uuid field
        self._sub: dict[int, list] = {}            # thread uuid -> its extra tracks for crossing slices
        self._ends: list = []                      # heap (end_ns, -seq, the end packet's tail)
        self._seq = 0
        # packets held back behind an rpc begin: their bytes in one buffer, the begins as marks
        # (begin, its place in the held stream); nothing is held while there is no mark
        self._marks: deque = deque()
        self._hbuf = bytearray()
        self._hbase = 0                            # the held stream's offset of _hbuf[0]
        self._out: list = []                       # packets not yet written (one write per _OUT_PIECES)
        self.flows = FlowLinker()
        self.n_slices = 0
        self.thread_name: dict = {}                # (pid, tid) -> name, filled by the caller
        self.process_info: dict = {}               # pid -> {"name", "labels", "sort_index"}
        self._write(packet(f_varint(10, SEQ_ID) + f_varint(13, SEQ_INCREMENTAL_STATE_CLEARED)))

    # ---- tracks

    def _new_uuid(self) -> int:
        self._last_uuid += 1
        return self._last_uuid

    def _process_track(self, pid: int) -> int:
        uuid = self._proc_tracks.get(pid)
        if uuid is None:
            uuid = self._proc_tracks[pid] = self._new_uuid()
            p = self.process_info.get(pid, {})
            pd = f_varint(1, pid) + f_str(6, str(p.get("name", f"process {pid}")))
            if p.get("labels"):
                pd += f_str(8, p["labels"])
            if isinstance(p.get("sort_index"), int):
                pd += f_varint(3, p["sort_index"])
            self._write(packet(f_bytes(60, f_varint(1, uuid) + f_bytes(3, pd)) + f_varint(10, SEQ_ID)))
        return uuid

    def track(self, pid: int, tid: int) -> int:
        """The uuid of a thread lane's track, described on first use."""
        uuid = self._tracks.get((pid, tid))
        if uuid is None:
            parent = self._process_track(pid)
            uuid = self._tracks[(pid, tid)] = self._new_uuid()
            name = self.thread_name.get((pid, tid), f"thread {tid}")
            td = f_varint(1, pid) + f_varint(2, tid) + f_str(5, name)
            self._write(packet(f_bytes(60, f_varint(1, uuid) + f_varint(5, parent) + f_bytes(4, td)) + f_varint(10, SEQ_ID)))
            self._described(uuid)
        return uuid

    def _described(self, uuid: int) -> None:
        self._uuid_f[uuid] = f_varint(11, uuid)
        te = f_varint(9, TYPE_SLICE_END) + f_varint(11, uuid)
        self._end_te[uuid] = _TRACK_EVENT + varint(len(te)) + te
        self._end_tail[uuid] = self._end_te[uuid] + _SEQ_ONLY
        self._open_ends[uuid] = []

    def _place(self, uuid: int, ts_ns: int, end_ns: int) -> int:
        """The track a slice goes on: its lane's, unless it crosses an open slice there (one track
        nests strictly in Perfetto); then the first of the lane's extra tracks where it nests."""
        candidates = [uuid] + self._sub.get(uuid, [])
        for u in candidates:
            stack = self._open_ends[u]
            while stack and stack[-1] <= ts_ns:
                stack.pop()
            if not stack or end_ns <= stack[-1]:
                stack.append(end_ns)
                return u
        sub = self._sub.setdefault(uuid, [])
        if len(sub) >= MAX_CROSSING:
            self._open_ends[sub[-1]].append(end_ns)
            return sub[-1]
        u = self._new_uuid()
        sub.append(u)
        name = f"(crossing {len(sub)})"
        self._write(packet(f_bytes(60, f_varint(1, u) + f_varint(5, uuid) + f_str(2, name)) + f_varint(10, SEQ_ID)))
        self._described(u)
        self._open_ends[u].append(end_ns)
        return u

    def counter_track(self, pid: int, name: str, unit: str) -> int:
        uuid = self._counters.get((pid, name))
        if uuid is None:
            parent = self._process_track(pid)
            uuid = self._counters[(pid, name)] = self._new_uuid()
            cd = f_str(6, unit)
            self._write(packet(f_bytes(60, f_varint(1, uuid) + f_varint(5, parent) + f_str(2, name) + f_bytes(8, cd))
                               + f_varint(10, SEQ_ID)))
        return uuid

    # ---- interning

    def _iid(self, table: dict, value: str, field: int, out: list) -> Optional[int]:
        iid = table.get(value)
        if iid is None:
            if len(table) >= MAX_INTERNED:
                return None
            iid = table[value] = len(table) + 1
            out.append(f_bytes(field, f_varint(1, iid) + f_str(2, value)))
        return iid

    def _interned_field(self, table: dict, value: str, interned_field: int, iid_field: int, inline_field: int,
                        out: list) -> bytes:
        """The TrackEvent field naming `value`: its iid (interned now if new), inline when the table is full."""
        if len(table) >= MAX_INTERNED:
            return f_str(inline_field, value)
        iid = len(table) + 1
        out.append(f_bytes(interned_field, f_varint(1, iid) + f_str(2, value)))
        enc = table[value] = f_varint(iid_field, iid)
        return enc

    def _name_cat(self, name: str, cat: str, interned: list) -> bytes:
        return b"".join((self._names.get(name) or self._interned_field(self._names, name, 2, 10, 23, interned),
                         self._cats.get(cat) or self._interned_field(self._cats, cat, 1, 3, 22, interned)))

    def _annotation(self, k: str, v: Any, out: list) -> bytes:
        aid = self._iid(self._arg_names, k, 3, out)
        sid = self._iid(self._str_values, v, 29, out) if isinstance(v, str) else None
        value = f_varint(17, sid) if sid is not None else _annotation_value(v)   # string_value_iid
        return f_bytes(4, (f_varint(1, aid) if aid is not None else f_str(10, k)) + value)

    def _annotations(self, args: dict, interned: list) -> bytes:
        """A span's debug_annotations fields (role and rank aside: the track says them)."""
        cache = self._ann
        te = []
        for k, v in args.items():
            if k == "role" or k == "rank":
                continue
            try:
                ck = (k, v.__class__, v)
                enc = cache.get(ck)
                if enc is None:
                    enc = self._annotation(str(k), v, interned)
                    if len(cache) < ANNOTATION_CACHE:
                        cache[ck] = enc
            except TypeError:  # an unhashable value (a list, a dict): encoded each time
                enc = self._annotation(str(k), v, interned)
            te.append(enc)
        return b"".join(te)

    # ---- events

    def slice(self, pid: int, tid: int, ts_ns: int, dur_ns: Optional[int], name: str, cat: str, args: dict,
              top_level: bool = False) -> None:
        """A span (dur_ns given) or an instant (dur_ns None). A `top_level` span (the outermost of its
        lane) ends the flow of the rpc span that caused it; an `rpc` span's begin is held until the
        spans it caused are known."""
        if ts_ns < 0:  # a tail event before the origin (packet timestamps are unsigned)
            dur_ns, ts_ns = (None if dur_ns is None else max(0, dur_ns + ts_ns)), 0
        if (self._ends and self._ends[0][0] <= ts_ns) or ts_ns > self.flows.min_end:
            self._flush_ends(ts_ns)
        uuid = self._tracks.get((pid, tid)) or self.track(pid, tid)
        if dur_ns is not None:
            uuid = self._place(uuid, ts_ns, ts_ns + dur_ns)
        interned: list = []
        te = [_BEGIN if dur_ns is not None else _INSTANT, self._uuid_f[uuid], self._name_cat(name, cat, interned),
              self._annotations(args, interned)]
        if top_level and dur_ns is not None and self.flows.open:
            flow_in = self.flows.link(pid)
            if flow_in is not None:
                te.append(f_fixed64(48, flow_in))
        te = b"".join(te)
        ts = _TS + varint(ts_ns)
        tail = (f_bytes(12, b"".join(interned)) + _SEQ_TAIL) if interned else _SEQ_TAIL
        if dur_ns is not None and cat == formats.CAT_RPC:
            held = _Held(ts, te, tail, ts_ns + dur_ns, pid)
            self.flows.add(held)
            self._marks.append((held, self._hbase + len(self._hbuf)))
        else:
            self._write(packet(ts + _TRACK_EVENT + varint(len(te)) + te + tail))
        if dur_ns is not None:
            self.n_slices += 1
            self._seq += 1
            heapq.heappush(self._ends, (ts_ns + dur_ns, -self._seq, self._end_tail[uuid]))

    def slices(self, items: list, on_iteration: Optional[Callable[[int, int, bytes], None]] = None) -> None:
        """The merge's events, `((pid, tid), pid, ts_ns, dur_ns or None, tag, args, outermost)` each
        (tag and args: timeline_spill's records), as `slice` writes them; `on_iteration(pid, ts_ns,
        args)` after each event of the iteration category.

        `slice` with every per-event step inlined (the ends due, the track's stack, the varints, the
        write or hold), name and category fields cached per record tag and all of a span's
        annotations per args text: at 20 M events a function call per event is seconds."""
        ends, flows, tracks, uuid_f, open_ends = self._ends, self.flows, self._tracks, self._uuid_f, self._open_ends
        tags, blocks, marks, hbuf, out, end_tail = self._tags, self._blocks, self._marks, self._hbuf, self._out, self._end_tail
        heappush, heappop, small, low = heapq.heappush, heapq.heappop, _SMALL, _LOW14
        seq = self._seq
        n_slices = 0
        ts_hi = e_hi = -1
        ts_hib = e_hib = b""
        for lane, pid, ts, dur, tag, args, top in items:
            if ends and ends[0][0] <= ts:   # _flush_ends, inline: the slice ends due before this
                while ends and ends[0][0] <= ts:
                    e, _s, et = heappop(ends)
                    if e < 16384:
                        v = small[e]
                    else:   # varint(e) = its low 14 bits + varint(e >> 14), which the ends, popped
                        if e >> 14 != e_hi:   # in time order, share for 16 us at a time
                            e_hi = e >> 14
                            e_hib = varint(e_hi)
                        v = low[e & 16383] + e_hib
                    data = b"".join((_PACKET, small[1 + len(v) + len(et)], _TS, v, et))  # no interned data
                    if marks:
                        hbuf += data
                        if len(hbuf) > HOLD_LIMIT_BYTES:
                            self._overflow()
                    else:
                        out.append(data)
            if ts > flows.min_end and flows.close_before(ts):
                self._release()
            uuid = tracks.get(lane) or self.track(pid, lane[1])
            if dur is not None:
                end = ts + dur
                stack = open_ends[uuid]   # _place's first try, inline
                while stack and stack[-1] <= ts:
                    stack.pop()
                if not stack or end <= stack[-1]:
                    stack.append(end)
                else:
                    uuid = self._place(uuid, ts, end)
            interned = None
            t = tags.get(tag[0])   # the JSON head: one per (ph, name, cat), its hash kept by the bytes
            if t is None:
                interned = []
                t = (self._name_cat(tag[2], tag[3], interned), tag[3] == formats.CAT_RPC, tag[3] == formats.CAT_ITERATION)
                if len(tags) >= BLOCK_CACHE:
                    tags.clear()
                tags[tag[0]] = t   # its names are interned now (or inline for good: the tables never shrink)
            ann = blocks.get(args)
            if ann is None:
                if interned is None:
                    interned = []
                ann = self._annotations(_args_dict(args), interned)
                if len(blocks) >= BLOCK_CACHE:
                    blocks.clear()
                blocks[args] = ann
            uf, nc = uuid_f[uuid], t[0]
            flow = b""
            if dur is not None and top and flows.open:
                fid = flows.link(pid)
                if fid is not None:
                    flow = f_fixed64(48, fid)
            tail = (f_bytes(12, b"".join(interned)) + _SEQ_TAIL) if interned else _SEQ_TAIL
            if ts < 16384:
                vts = small[ts]
            else:   # as the ends: the events come in time order
                if ts >> 14 != ts_hi:
                    ts_hi = ts >> 14
                    ts_hib = varint(ts_hi)
                vts = low[ts & 16383] + ts_hib
            if dur is not None and t[1]:   # an rpc begin: held until its flows are known
                h = _Held(_TS + vts, b"".join((_BEGIN, uf, nc, ann, flow)), tail, end, pid)
                flows.add(h)
                marks.append((h, self._hbase + len(hbuf)))
            else:
                n = _TYPE_LEN + len(uf) + len(nc) + len(ann) + len(flow)   # the TrackEvent's length
                body_len = 2 + len(vts) + (1 if n < 128 else len(varint(n))) + n + len(tail)
                data = b"".join((_PACKET, small[body_len] if body_len < 16384 else varint(body_len), _TS, vts,
                                 _TRACK_EVENT, small[n] if n < 16384 else varint(n),
                                 _INSTANT if dur is None else _BEGIN, uf, nc, ann, flow, tail))
                if marks:
                    hbuf += data
                    if len(hbuf) > HOLD_LIMIT_BYTES:
                        self._overflow()
                else:
                    out.append(data)
            if dur is not None:
                n_slices += 1
                seq += 1
                heappush(ends, (end, -seq, end_tail[uuid]))
            if len(out) >= _OUT_PIECES:
                self._drain()
            if on_iteration is not None and t[2]:
                self._seq = seq
                on_iteration(pid, ts, args)
        self._seq = seq
        self.n_slices += n_slices

    def note(self, ts_ns: int, name: str, args: dict) -> None:
        """An instant on the merge's own track (what was cut, ...)."""
        self.process_info.setdefault(0, {"name": "mindspeed-profiler merge"})
        self.thread_name.setdefault((0, 0), "merge")
        self.slice(0, 0, ts_ns, None, name, "merge", args)

    def counter(self, pid: int, name: str, unit: str, ts_ns: int, value: float) -> None:
        self._flush_ends(ts_ns)
        uuid = self.counter_track(pid, name, unit)
        te = f_varint(9, TYPE_COUNTER) + f_varint(11, uuid) + f_double(44, float(value))
        self._write(packet(_TS + varint(ts_ns) + _TRACK_EVENT + varint(len(te)) + te + _SEQ_TAIL))

    def _flush_ends(self, ts_ns: int) -> None:
        ends = self._ends
        while ends and ends[0][0] <= ts_ns:
            end, _s, et = heapq.heappop(ends)
            v = varint(end)
            self._write(b"".join((_PACKET, _SMALL[1 + len(v) + len(et)], _TS, v, et)))  # no interned data
        if self.flows.close_before(ts_ns):
            self._release()

    def finish(self) -> None:
        """Write what is still open: every pending end, every held rpc begin."""
        self._flush_ends(1 << 62)
        for h in self.flows.open:
            h.sealed = True
            h.open = False
        self.flows.open = []
        self._release()
        self._drain()

    # ---- holding back rpc begins

    def _write(self, data: bytes) -> None:
        if self._marks:
            self._hbuf += data
            if len(self._hbuf) > HOLD_LIMIT_BYTES:
                self._overflow()
        else:
            self._out.append(data)
            if len(self._out) >= _OUT_PIECES:
                self._drain()

    def _overflow(self) -> None:
        """Bounded memory: the oldest held rpc begin gets no more flows, and what it held is written."""
        self._marks[0][0].sealed = True
        self.flows.min_end = -1  # force the sealed one out
        self.flows.close_before(0)
        self._release()

    def _drain(self) -> None:
        if self._out:
            self._fh.write(b"".join(self._out))
            self._out.clear()

    def _release(self) -> None:
        """Write the held packets up to the first rpc begin that may still get flows."""
        marks, hbuf, out = self._marks, self._hbuf, self._out
        pos = 0   # in hbuf: what is written
        while marks and not marks[0][0].open:
            h, at = marks.popleft()
            at -= self._hbase
            if at > pos:
                out.append(bytes(hbuf[pos:at]))
                pos = at
            out.append(h.encode())
        if not marks:
            if pos < len(hbuf):
                out.append(bytes(hbuf[pos:]))
            self._hbase += len(hbuf)
            hbuf.clear()
        elif pos:
            del hbuf[:pos]   # O(1): a bytearray drops its head by moving its start
            self._hbase += pos
        if len(out) >= _OUT_PIECES:
            self._drain()


def _args_dict(args: bytes) -> dict:
    """A merge record's args text (timeline_spill.py: `,"k":v}`, `}` or `{...}`) as a dict."""
    c = args[0]
    return orjson.loads(b"{" + args[1:]) if c == 44 else orjson.loads(args) if c == 123 else {}


def write_tail(writer: PftraceWriter, events: Iterable[dict]) -> None:
    """Chrome trace events added after the stream (RLinf's, py-spy's: already in memory) on their
    own tracks: thread names from their metadata, times from their microseconds."""
    events = list(events)
    for e in events:
        if e.get("ph") == "M" and e.get("name") == "thread_name":
            writer.thread_name.setdefault((e.get("pid"), e.get("tid")), str(e.get("args", {}).get("name")))
        elif e.get("ph") == "M" and e.get("name") == "process_name":
            writer.process_info.setdefault(e.get("pid"), {"name": str(e.get("args", {}).get("name"))})
    spans = [e for e in events if e.get("ph") in ("X", "i", "C") and isinstance(e.get("pid"), int)
             and isinstance(e.get("tid"), int) and isinstance(e.get("ts"), (int, float))]
    spans.sort(key=lambda e: (e["ts"], -(e.get("dur") or 0)))
    for e in spans:
        if e["ph"] == "C":   # one counter track per arg, "<name> <arg>" as Perfetto's JSON import names it
            for k, v in (e["args"] if isinstance(e.get("args"), dict) else {}).items():
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    writer.counter(e["pid"], f"{e.get('name')} {k}", "", max(0, round(e["ts"] * 1000)), v)
            continue
        dur = round(float(e.get("dur") or 0) * 1000) if e["ph"] == "X" else None
        writer.slice(e["pid"], e["tid"], round(e["ts"] * 1000), dur, str(e.get("name")), str(e.get("cat", "")),
                     e.get("args") if isinstance(e.get("args"), dict) else {})
