"""Which device activity is communication (collectives, point-to-point), by name or by the
process (Ascend's HCCL / Communication rows) it was recorded on."""
from __future__ import annotations

import re

COMM_RE = re.compile(
    r"nccl|hccl|hcom|allreduce|all_reduce|allgather|all_gather|reducescatter|reduce_scatter|"
    r"alltoall|all_to_all|sendrecv|send_recv|broadcast|c10d|gloo:", re.I)
# the same as COMM_RE as plain substrings of the lower-cased name (much faster than a
# case-insensitive alternation on long C++ kernel names)
COMM_KEYS = ("nccl", "hccl", "hcom", "allreduce", "all_reduce", "allgather", "all_gather", "reducescatter",
             "reduce_scatter", "alltoall", "all_to_all", "sendrecv", "send_recv", "broadcast", "c10d", "gloo:")
COMM_PROCESSES = ("HCCL", "Communication")   # Ascend trace_view process names


def is_comm_name(n) -> bool:
    return any(map(str(n).lower().__contains__, COMM_KEYS))


def is_comm_kind(kind: str) -> bool:
    """An Ascend kernel_details row's "<Type> <Accelerator Core>" says communication."""
    return bool(COMM_RE.search(kind)) or "HCCL" in kind.upper() or "COMMUNICATION" in kind.upper()
