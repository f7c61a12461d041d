"""Kineto's `[memory]` instant events (torch.profiler profile_memory=True) -> records, taken during
the one parse of a trace (EventTable.add_batch, typed_events.columns): analyzers/memory_peaks.py
reads them from there instead of parsing the file a second time.

A record is (ts, pid, tid, device_type, device_id, bytes, total_allocated, total_reserved), the
totals None where the trace has none (torch 1.x); an event lacking a usable field is no record
(counted as unusable). memory_peaks.py's module doc says what the fields mean.
"""
from __future__ import annotations

from .numbers import INT64, finite_number, json_int  # noqa: F401 (INT64: the memory block reads it from here)

MEMORY_EVENT = "[memory]"   # the events' name
TOTAL_KEYS = ("Total Allocated", "Total Reserved")
ARG_KEYS = ("Device Type", "Device Id", "Bytes") + TOTAL_KEYS   # the args a record reads


# the names the memory block reads them by; the rules are numbers.py's
as_int = json_int
as_real = finite_number


def memory_record(ts, pid, tid, args) -> tuple | None:
    """The record of one [memory] event from its raw values (args: the event's args, a dict to be
    usable), None when it is unusable."""
    if not isinstance(args, dict):
        return None
    ts, dt, di, nb = as_real(ts), as_int(args.get("Device Type")), as_int(args.get("Device Id")), as_int(args.get("Bytes"))
    if ts is None or dt is None or di is None or nb is None:
        return None
    tot = []
    for k in TOTAL_KEYS:
        v = args.get(k)
        if v is not None and (as_int(v) is None or v < 0):
            return None
        tot.append(v)
    return ts, str(pid), str(tid), dt, di, nb, tot[0], tot[1]
