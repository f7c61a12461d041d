"""Which activity is communication, by what the trace itself says: the collective library's family
name as a word (nccl, rccl, hccl / hcom, gloo: `ncclDevKernel_AllReduce`, `gloo:all_reduce`,
`hcom_broadcast_`, never `BroadcastTo`), the process it was recorded on (Ascend's HCCL /
Communication rows), or Ascend's accelerator core (HCCL); and how much of it the rest did not hide.
"""
from __future__ import annotations

import re

import numpy as np

from mindspeed_profiler.analysis.analyzers import intervals
from mindspeed_profiler.analysis.models.rows import Field, RowModel, block, each_capture

# The family name as a word: not preceded by a letter; not followed by a lower-case letter (so
# camel case such as ncclDevKernel and HcclAllReduce count, "ncclx" or "hcomb" do not).
COMM_FAMILY_RE = re.compile(r"(?<![A-Za-z])(?:[Nn][Cc][Cc][Ll]|[Rr][Cc][Cc][Ll]|[Hh][Cc][Cc][Ll]|[Hh][Cc][Oo][Mm]|"
                            r"[Gg][Ll][Oo][Oo])(?![a-z])")
COMM_PROCESSES = ("HCCL", "Communication")   # Ascend trace_view process names
# host-side entry points of torch.distributed collectives (Kineto cpu_op names)
HOST_COMM_PREFIXES = ("c10d::", "record_param_comms")


def is_comm_name(name) -> bool:
    return COMM_FAMILY_RE.search(str(name)) is not None


def is_host_comm_name(name) -> bool:
    """A host op / range that is a collective call (gloo:all_reduce, nccl:all_reduce, c10d::...)."""
    n = str(name)
    return n.startswith(HOST_COMM_PREFIXES) or COMM_FAMILY_RE.search(n) is not None


def is_comm_kind(task_type: str, core: str) -> bool:
    """An Ascend kernel_details row is communication: its accelerator core is HCCL, or its task type
    is a collective's (hcom_allReduce_, HcclAllReduce...)."""
    return core.strip().upper() == "HCCL" or is_comm_name(task_type)


def host_communication(ts: np.ndarray, end: np.ndarray, wall_us: float) -> dict | None:
    """The time covered by host-side collective calls (nested calls counted once) and its share of
    the capture's wall time: on CPU runs (gloo) this is where the communication is."""
    if not len(ts):
        return None
    covered = intervals.union_length(ts, end)
    return COMMUNICATION.part("host", total_us=covered, share_of_wall=covered / wall_us if wall_us > 0 else None)


def device_communication(breakdown: dict | None) -> dict | None:
    """The communication part of a device breakdown: total, exposed (not hidden under compute),
    overlapped, and the exposed share of the busy time; None without device communication."""
    if not breakdown or not breakdown.get("communication_us"):
        return None
    busy = breakdown["busy_us"]
    exposed = breakdown["communication_exposed_us"]
    return COMMUNICATION.part("device", total_us=breakdown["communication_us"], exposed_us=exposed,
                              overlapped_us=breakdown["communication_overlapped_us"],
                              share_of_busy=exposed / busy if busy else None)


def communication_summary(device: dict | None, host: dict | None, calls: list[dict], top_n: int) -> dict | None:
    """A capture's `communication` field: device and host parts and the collectives by time
    (calls: {name, where: device | host, count, total_us}); None when there is none."""
    if device is None and host is None:
        return None
    return COMMUNICATION.row(device=device, host=host, top=sorted(calls, key=lambda r: -r["total_us"])[:top_n])


def collective_call(name: str, where: str, count: int, total_us: float) -> dict:
    """One `communication.top` row (a collective kernel, op or host call)."""
    return COLLECTIVES.row(name=name, where=where, count=count, total_us=total_us)


# -- rows (rows.py): summary.json captures[*].communication; analysis.db communication / collectives


COMMUNICATION = RowModel(
    "communication", "capture with any communication (device, host or Ascend collectives)",
    "captures[*].communication", table="communication", method="communication", primary="capture_id",
    open_row=True, holds=("top", "links", "communication_matrix"), select=each_capture(block("communication")), fields=(
        Field("device_total_us", "us", "time covered by collective kernels / ops on the device",
              aliases=("communication_us",), key=("device", "total_us")),
        Field("device_exposed_us", "us", "the part of it not hidden under compute (= device.communication_exposed_us)",
              aliases=("exposed_us",), key=("device", "exposed_us")),
        Field("device_overlapped_us", "us", "the part of it under compute", aliases=("overlapped_us",),
              key=("device", "overlapped_us")),
        Field("device_share_of_busy", "share", "exposed / the device's busy time",
              aliases=("exposed_share_of_busy",), key=("device", "share_of_busy")),
        Field("host_total_us", "us", "time covered by host-side collective calls (gloo, nccl, c10d; nested once)",
              key=("host", "total_us")),
        Field("host_share_of_wall", "share", "host_total_us / the capture's wall time", key=("host", "share_of_wall")),
        Field("collectives_wait_share", "share", "Ascend communication.json: the collectives' time waiting for "
              "other ranks / their elapse time", key=("collectives", "wait_share")),
    ))

COLLECTIVES = RowModel(
    "collectives", "top collective of a capture, by time", "captures[*].communication.top[*]",
    table="collectives", method="collectives",
    select=each_capture(lambda c: (c.get("communication") or {}).get("top")), fields=(
        Field("name", "text", "the collective kernel / op / call"),
        # `where` is an SQL keyword: the db named it location first
        Field("location", "text", "device or host", aliases=("where",), key=("where",)),
        Field("count", "count", "calls"),
        Field("total_us", "us", "summed duration"),
    ))
