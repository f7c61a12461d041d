"""Decoding a timeline.pftrace with Perfetto's own generated protos (the perfetto package, a test
dependency) into what the JSON timeline says: tracks, slices, flows, counters."""
from __future__ import annotations

from dataclasses import dataclass, field

from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

TE = pb.TrackEvent


@dataclass
class Decoded:
    processes: dict = field(default_factory=dict)   # pid -> process_name
    threads: dict = field(default_factory=dict)     # track uuid -> (pid, tid, thread_name)
    counters: dict = field(default_factory=dict)    # track uuid -> (pid, name)
    slices: list = field(default_factory=list)      # (pid, tid, name, cat, ts_ns, dur_ns | None, args)
    counter_values: list = field(default_factory=list)  # (pid, name, ts_ns, value)
    flows: list = field(default_factory=list)       # (index of the source slice, index of the destination slice)
    packets: int = 0


def _value(a) -> object:
    kind = a.WhichOneof("value")
    return getattr(a, kind) if kind != "legacy_json_value" else ("json", a.legacy_json_value)


def decode(path) -> Decoded:
    trace = pb.Trace()
    trace.ParseFromString(open(path, "rb").read())
    out = Decoded(packets=len(trace.packet))
    names, cats, arg_names, str_values = {}, {}, {}, {}
    open_: dict = {}                 # uuid -> stack of slice indices
    flow_src: dict = {}
    proc_uuid: dict = {}
    cleared = False
    for p in trace.packet:
        assert p.trusted_packet_sequence_id == 1
        if p.sequence_flags & pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED:
            cleared, names, cats, arg_names, str_values = True, {}, {}, {}, {}
        if p.HasField("interned_data"):
            names.update({x.iid: x.name for x in p.interned_data.event_names})
            cats.update({x.iid: x.name for x in p.interned_data.event_categories})
            arg_names.update({x.iid: x.name for x in p.interned_data.debug_annotation_names})
            str_values.update({x.iid: x.str.decode() for x in p.interned_data.debug_annotation_string_values})
        if p.HasField("track_descriptor"):
            d = p.track_descriptor
            if d.HasField("process"):
                out.processes[d.process.pid] = d.process.process_name
                proc_uuid[d.uuid] = d.process.pid
            elif d.HasField("thread"):
                out.threads[d.uuid] = (d.thread.pid, d.thread.tid, d.thread.thread_name)
            elif d.HasField("counter"):
                out.counters[d.uuid] = (proc_uuid[d.parent_uuid], d.name)
            else:  # a lane's extra track for crossing slices: its thread's
                out.threads[d.uuid] = out.threads[d.parent_uuid]
            continue
        if not p.HasField("track_event"):
            continue
        e = p.track_event
        assert cleared and (e.type == TE.TYPE_SLICE_END or p.sequence_flags & pb.TracePacket.SEQ_NEEDS_INCREMENTAL_STATE)
        if e.type == TE.TYPE_COUNTER:
            pid, name = out.counters[e.track_uuid]
            out.counter_values.append((pid, name, p.timestamp, e.double_counter_value))
            continue
        if e.type == TE.TYPE_SLICE_END:
            k = open_[e.track_uuid].pop()
            s = out.slices[k]
            out.slices[k] = s[:5] + (p.timestamp - s[4],) + s[6:]
            continue
        pid, tid, _ = out.threads[e.track_uuid]
        name = names[e.name_iid] if e.HasField("name_iid") else e.name
        cat = ",".join([cats[i] for i in e.category_iids] + list(e.categories))
        args = {(arg_names[a.name_iid] if a.HasField("name_iid") else a.name):
                str_values[a.string_value_iid] if a.HasField("string_value_iid") else _value(a) for a in e.debug_annotations}
        k = len(out.slices)
        out.slices.append((pid, tid, name, cat, p.timestamp, None, args))
        if e.type == TE.TYPE_SLICE_BEGIN:
            open_.setdefault(e.track_uuid, []).append(k)
        for f in e.flow_ids:
            flow_src[f] = k
        for f in e.terminating_flow_ids:
            out.flows.append((flow_src.pop(f), k))
    assert not any(open_.values()), "slices never ended"
    return out
