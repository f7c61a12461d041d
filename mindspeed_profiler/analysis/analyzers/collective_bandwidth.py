"""Algorithm and bus bandwidth per collective, from the message sizes torch (>= 2.1) writes in the
args of `record_param_comms` host ops and, on newer releases, of the NCCL kernels themselves
("Collective name", "In msg nelems", "Out msg nelems", "Group size", "dtype", "Process Group
Name", ...; parsing/events.py keeps them as `Events.comm_args`). Pure (docs/diagnosis.md,
"Collective bandwidth").

One instance per collective call:
  - a device kernel carrying the args: its own duration (source "kernel");
  - a host op carrying them: the collective kernels it launched (a runtime call on the op's thread
    inside the op's span, joined to the kernel by correlation id, as idle_causes.py joins a launch)
    summed (source "kernel via launch"); an op whose kernel carries the args itself is that
    kernel's instance, not a second one. An op that launched no collective kernel: on a trace with
    device activity its own span is only the enqueue (NCCL is asynchronous), so no time (source
    "no kernel": NCCL with one rank launches nothing); on a trace without device activity (a CPU
    backend) its own duration (source "host op").

bytes = max(In msg nelems, Out msg nelems) x the dtype's size: nccl-tests' size S, the total
buffer (all_gather: the gathered output; reduce_scatter: the input). algbw = S / t in GB/s (1e9
bytes per second, as nccl-tests prints); busbw = algbw x nccl-tests' factor for n = Group size
(NVIDIA/nccl-tests doc/PERFORMANCE.md and src/*.cu @ a0b82b2): all_reduce 2(n-1)/n; all_gather,
reduce_scatter, all_to_all, gather, scatter (n-1)/n; broadcast, reduce, send, recv 1.

Rows per (collective, dtype, group size, process group, source, message size): count, total time,
bytes, the time-weighted bandwidths (total bytes / total time) and the per-call min / max. A row of
messages under LATENCY_BOUND_BYTES is `latency_bound`: such a transfer is dominated by the launch
and the protocol's latency, its bandwidth says little about the links.
"""
from __future__ import annotations

import numpy as np

from mindspeed_profiler.analysis.models.rows import Field, RowModel, each_capture, listed
from .classify import ClassifiedTrace
from .grouping import distinct
from .idle_causes import last_by_corr

LATENCY_BOUND_BYTES = 1 << 20     # 1 MiB: below it a collective is latency-bound (nccl-tests' curves flatten above)
MAX_SIZES = 8                     # distinct sizes of one (collective, dtype, group) kept exact; more: power-of-two buckets
GB = 1e9                          # nccl-tests: bytes / 1.0E9 / seconds
KERNEL, LAUNCHED, HOST, NO_KERNEL = "kernel", "kernel via launch", "host op", "no kernel"

# torch ScalarType names (c10's toString, what Kineto writes) and the Python names, lower-cased
DTYPE_BYTES: dict[str, int] = {
    "float": 4, "float32": 4, "double": 8, "float64": 8, "half": 2, "float16": 2, "bfloat16": 2,
    "long": 8, "int64": 8, "int": 4, "int32": 4, "short": 2, "int16": 2, "char": 1, "int8": 1,
    "byte": 1, "uint8": 1, "bool": 1, "uint16": 2, "uint32": 4, "uint64": 8,
    "complexhalf": 4, "complexfloat": 8, "complex64": 8, "complexdouble": 16, "complex128": 16,
    "qint8": 1, "quint8": 1, "qint32": 4, "quint4x2": 1, "quint2x4": 1,
    "bits1x8": 1, "bits2x4": 1, "bits4x2": 1, "bits8": 1, "bits16": 2,
    "float8_e5m2": 1, "float8_e4m3fn": 1, "float8_e5m2fnuz": 1, "float8_e4m3fnuz": 1, "float8_e8m0fnu": 1,
}

# nccl-tests' busbw factor per collective, n = ranks
_FACTORS = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n, "reduce_scatter": lambda n: (n - 1) / n,
    "all_to_all": lambda n: (n - 1) / n, "gather": lambda n: (n - 1) / n, "scatter": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0, "reduce": lambda n: 1.0, "send": lambda n: 1.0, "recv": lambda n: 1.0,
}
# c10d's names ("allreduce", "_allgather_base", "allgather_into_tensor_coalesced", "all_to_allv",
# "reduce_scatter_tensor_coalesced", ...) by prefix, "_" removed; longest prefixes first
_PREFIXES = (("reducescatter", "reduce_scatter"), ("allreduce", "all_reduce"), ("allgather", "all_gather"),
             ("alltoall", "all_to_all"), ("broadcast", "broadcast"), ("reduce", "reduce"), ("gather", "gather"),
             ("scatter", "scatter"), ("send", "send"), ("recv", "recv"))


def dtype_bytes(dtype) -> int | None:
    """Bytes per element of a torch dtype name ("Float", "BFloat16", "torch.float16"); None unknown."""
    if not isinstance(dtype, str):
        return None
    d = dtype.strip().lower()
    return DTYPE_BYTES.get(d[6:] if d.startswith("torch.") else d)


def canonical_collective(name) -> str | None:
    """nccl-tests' name of a c10d collective name; None for one that moves no data of its own
    (barrier, wait, coalesced bookkeeping) or is unknown."""
    if not isinstance(name, str):
        return None
    s = name.lower().replace("_", "")
    for prefix, op in _PREFIXES:
        if s.startswith(prefix):
            return op
    return None


def busbw_factor(op: str | None, n) -> float | None:
    """nccl-tests' factor busbw / algbw of collective `op` over n ranks (0 for all_reduce at n=1);
    None for an unknown collective or a group size that is not a positive integer."""
    f = _FACTORS.get(op) if op else None
    if f is None or not isinstance(n, (int, np.integer)) or isinstance(n, bool) or n < 1:
        return None
    return float(f(int(n)))


def message_bytes(args: dict) -> int | None:
    """max(In, Out msg nelems) x the dtype's size; None without a known dtype or a count."""
    size = dtype_bytes(args.get("dtype"))
    counts = [v for v in (args.get("In msg nelems"), args.get("Out msg nelems"))
              if isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v < 2**62]   # no NaN / inf
    if size is None or not counts:
        return None
    return int(max(counts)) * size


def algbw_gbps(nbytes: float | None, us: float | None) -> float | None:
    """bytes / time in GB/s (1e9 B/s); None without bytes or a positive time."""
    if nbytes is None or us is None or not us > 0:
        return None
    return nbytes / (us * 1e-6) / GB


# -- instances -------------------------------------------------------------------------------

def _launched_kernels(ct: ClassifiedTrace, hosts: np.ndarray) -> dict[int, list[int]]:
    """host op index -> the collective kernels launched inside it: each kernel's launch (the last
    runtime call with its correlation id) on the op's thread within [op start, op end]."""
    ev, m = ct.ev, ct.m
    kern = np.flatnonzero(m["comm"] & (ev.corr >= 0))
    rt = np.flatnonzero(m["runtime"] & (ev.corr >= 0))
    out: dict[int, list[int]] = {}
    if not len(kern) or not len(rt) or not len(hosts):
        return out
    launch = last_by_corr(ev.corr[rt], rt.astype(np.float64), ev.corr[kern])
    ok = ~np.isnan(launch)
    kern, launch = kern[ok], launch[ok].astype(np.int64)
    width = len(ev.tids) + 1
    thread = lambda i: ev.pid[i].astype(np.int64) * width + ev.tid[i]
    h_key, l_key = thread(hosts), thread(launch)
    for k in distinct(h_key):
        h = hosts[h_key == k]
        h = h[np.argsort(ct.ts[h], kind="stable")]
        sel = l_key == k
        if not sel.any():
            continue
        lt = ct.ts[launch[sel]]
        j = np.searchsorted(ct.ts[h], lt, side="right") - 1   # the latest op starting at or before the launch
        inside = (j >= 0) & (lt <= ct.end[h[np.maximum(j, 0)]])
        for kk, jj in zip(kern[sel][inside], j[inside]):
            out.setdefault(int(h[jj]), []).append(int(kk))
    return out


def collective_instances(ct: ClassifiedTrace) -> list[dict]:
    """One dict per collective call (module doc): the trace's args, bytes, us (None: untimed),
    source, kernel count."""
    ev, m = ct.ev, ct.m
    comm = getattr(ev, "comm_args", None) or {}
    idx = np.array(sorted(i for i in comm if 0 <= i < len(ev)), dtype=np.int64)
    if not len(idx):
        return []
    idx = idx[~m["skip"][idx]]
    on_device = m["device"][idx]
    hosts = idx[~on_device]
    launched = _launched_kernels(ct, hosts)
    any_device = bool(m["device"].any())
    out = []
    for i in idx[on_device]:
        out.append(_instance(comm[int(i)], float(ct.dur[i]), KERNEL, 1))
    for i in hosts:
        ks = launched.get(int(i), [])
        if any(k in comm for k in ks):
            continue    # the kernel carries the args: counted as its own instance
        if ks:
            out.append(_instance(comm[int(i)], float(sum(ct.dur[k] for k in ks)), LAUNCHED, len(ks)))
        elif any_device:
            out.append(_instance(comm[int(i)], None, NO_KERNEL, 0))
        else:
            out.append(_instance(comm[int(i)], float(ct.dur[i]), HOST, 0))
    return out


def _text(v) -> str | None:
    return None if v is None else str(v)


def _ranks(v) -> int | None:
    """A group size the rows can hold: a positive integer below 2**31, else None."""
    return int(v) if isinstance(v, (int, np.integer)) and not isinstance(v, bool) and 0 < v < 2**31 else None


def _instance(args: dict, us: float | None, source: str, n_kernels: int) -> dict:
    # the trace's values as text / numbers the rows and analysis.db can hold (a hostile trace's
    # list or 70-bit number becomes text / None)
    return {"collective": _text(args.get("Collective name")), "dtype": _text(args.get("dtype")),
            "group_size": _ranks(args.get("Group size")), "pg_name": _text(args.get("Process Group Name")),
            "pg_desc": _text(args.get("Process Group Description")), "bytes": message_bytes(args), "us": us,
            "source": source, "n_kernels": n_kernels}


# -- rows --------------------------------------------------------------------------------------

def _size_keys(instances: list[dict]) -> list:
    """Per instance, the size part of its row key: the exact bytes, or (a group of one collective,
    dtype, group size, process group and source with more than MAX_SIZES distinct sizes) the
    power of two at or below them."""
    group = lambda r: (str(r["collective"]), str(r["dtype"]), str(r["group_size"]), str(r["pg_name"]), r["source"])
    sizes: dict = {}
    for r in instances:
        sizes.setdefault(group(r), set()).add(r["bytes"])
    out = []
    for r in instances:
        b = r["bytes"]
        if b is not None and b > 0 and len(sizes[group(r)]) > MAX_SIZES:
            out.append(("bucket", 1 << (int(b).bit_length() - 1)))
        else:
            out.append(("exact", b))
    return out


def bandwidth_rows(instances: list[dict], latency_bytes: int = LATENCY_BOUND_BYTES) -> list[dict]:
    """COLLECTIVE_BANDWIDTH rows of a capture's instances, the most time first."""
    groups: dict = {}
    for r, sk in zip(instances, _size_keys(instances)):
        key = (str(r["collective"]), str(r["dtype"]), str(r["group_size"]), str(r["pg_name"]), r["source"], sk)
        groups.setdefault(key, []).append(r)
    rows = [_row(rs, sk, latency_bytes) for (*_, sk), rs in groups.items()]
    rows.sort(key=lambda r: (-(r["total_us"] or 0.0), -(r["bytes"] or 0), str(r["collective"])))
    return rows


def _row(rs: list[dict], size_key: tuple, latency_bytes: int) -> dict:
    first = rs[0]
    op = canonical_collective(first["collective"])
    n = first["group_size"]
    factor = busbw_factor(op, n)
    sized = [r["bytes"] for r in rs if r["bytes"] is not None]
    timed = [r for r in rs if r["us"] is not None and r["bytes"] is not None and op is not None]
    t_us = float(sum(r["us"] for r in timed))
    t_bytes = sum(r["bytes"] for r in timed)
    per_call = [algbw_gbps(r["bytes"], r["us"]) for r in timed]
    per_call = [x for x in per_call if x is not None]
    alg = algbw_gbps(t_bytes, t_us)
    bpc = int(round(sum(sized) / len(sized))) if sized else None
    return COLLECTIVE_BANDWIDTH.row(
        collective=first["collective"], op=op, dtype=first["dtype"], group_size=n,
        pg_name=first["pg_name"], pg_desc=first["pg_desc"], source=first["source"],
        size_bucket=size_key[0] == "bucket",
        count=len(rs), n_timed=len(timed), n_kernels=sum(r["n_kernels"] for r in rs),
        total_us=float(sum(r["us"] for r in rs if r["us"] is not None)) if any(r["us"] is not None for r in rs) else None,
        bytes=sum(sized) if sized else None, bytes_per_call=bpc,
        bytes_min=min(sized) if sized else None, bytes_max=max(sized) if sized else None,
        algbw_gbps=alg, busbw_gbps=None if alg is None or factor is None else alg * factor,
        algbw_min_gbps=min(per_call) if per_call else None, algbw_max_gbps=max(per_call) if per_call else None,
        busbw_factor=factor,
        latency_bound=None if bpc is None or op is None else bpc < latency_bytes,
    )


def trace_collective_bandwidth(ct: ClassifiedTrace) -> list[dict]:
    """The capture's COLLECTIVE_BANDWIDTH rows ([] when the trace has no collective args)."""
    return bandwidth_rows(collective_instances(ct))


COLLECTIVE_BANDWIDTH = RowModel(
    "collective_bandwidth", "(collective, dtype, group size, process group, time source, message size) of a "
    "Kineto capture whose collectives carry torch's message sizes", "captures[*].collective_bandwidth[*]",
    table="collective_bandwidth", method="collective_bandwidth", per_capture=True,
    select=each_capture(listed("collective_bandwidth")), fields=(
        Field("collective", "text", "the trace's Collective name (allreduce, _allgather_base, all_to_allv, ...)"),
        Field("op", "text", "nccl-tests' name (all_reduce, all_gather, reduce_scatter, all_to_all, broadcast, reduce, "
              "gather, scatter, send, recv); None for barrier, wait and unknown names: no bandwidth"),
        Field("dtype", "text", "the trace's dtype (Float, BFloat16, ...)"),
        Field("group_size", "count", "the trace's Group size: nccl-tests' n"),
        Field("pg_name", "text", "Process Group Name"),
        Field("pg_desc", "text", "Process Group Description (torch >= 2.3)"),
        Field("source", "text", "the time of a call: 'kernel' (a kernel carrying the args), 'kernel via launch' "
              "(the collective kernels the host op launched), 'host op' (a trace without device activity: the op's "
              "own duration), 'no kernel' (no time)"),
        Field("size_bucket", "flag", "1: the calls are grouped by power of two of their bytes (more than 8 sizes), "
              "0: by exact bytes"),
        Field("count", "count", "calls"),
        Field("n_timed", "count", "calls with a time, known bytes and a known collective"),
        Field("n_kernels", "count", "the collective kernels timed (a host op launching several: summed)"),
        Field("total_us", "us", "the calls' time (see source); None when none has one"),
        Field("bytes", "bytes", "the calls' message bytes: max(In, Out msg nelems) x dtype size, summed; None for an "
              "unknown dtype"),
        Field("bytes_per_call", "bytes", "bytes / count (rounded)"),
        Field("bytes_min", "bytes", "the smallest call"),
        Field("bytes_max", "bytes", "the largest call"),
        Field("algbw_gbps", "GB/s", "algorithm bandwidth, time-weighted: the timed calls' bytes / their time, 1e9 B/s"),
        Field("busbw_gbps", "GB/s", "bus bandwidth: algbw_gbps x busbw_factor"),
        Field("algbw_min_gbps", "GB/s", "the slowest timed call's bytes / time"),
        Field("algbw_max_gbps", "GB/s", "the fastest timed call's bytes / time"),
        Field("busbw_factor", "ratio", "nccl-tests' factor: all_reduce 2(n-1)/n; all_gather, reduce_scatter, "
              "all_to_all, gather, scatter (n-1)/n; broadcast, reduce, send, recv 1"),
        Field("latency_bound", "flag", "bytes_per_call under 1 MiB (LATENCY_BOUND_BYTES): latency dominates, the "
              "bandwidth says little of the links; None without bytes or a known collective"),
    ))
