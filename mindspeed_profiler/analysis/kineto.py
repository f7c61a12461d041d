"""Summarise one Chrome/Kineto trace (torch.profiler, or torch_npu's trace_view.json).

Pure: takes an `Events` table, returns a JSON-able dict. Definitions (all in microseconds):

- wall: first event start to last event end (profiler bookkeeping spans excluded).
- device busy: time covered by at least one device activity (kernel, memcpy/memset, Ascend
  hardware task, HCCL), split exclusively: compute, then communication not overlapped by
  compute, then memory copy not overlapped by either; idle = device window - busy, where the
  window runs from the first to the last device activity. So busy = compute +
  communication_exposed + memcpy_exposed, and busy + idle = window.
- self time of a host op: its duration minus the durations of its direct children on the same
  thread (ops, annotations, runtime calls). Device time of an op: the kernels launched (by
  correlation id) from runtime calls directly inside it.
"""
from __future__ import annotations

import re

import numpy as np

from . import intervals
from .events import Events

COMM_RE = re.compile(
    r"nccl|hccl|hcom|allreduce|all_reduce|allgather|all_gather|reducescatter|reduce_scatter|"
    r"alltoall|all_to_all|sendrecv|send_recv|broadcast|c10d|gloo:", re.I)
MEMCPY_RE = re.compile(r"memcpy|memset|MEMCPY|MEMSET", re.I)
STEP_RE = re.compile(r"^ProfilerStep#(\d+)$")
# the same as COMM_RE / MEMCPY_RE as plain substrings of the lower-cased name (much faster than
# a case-insensitive alternation on long C++ kernel names)
COMM_KEYS = ("nccl", "hccl", "hcom", "allreduce", "all_reduce", "allgather", "all_gather", "reducescatter",
             "reduce_scatter", "alltoall", "all_to_all", "sendrecv", "send_recv", "broadcast", "c10d", "gloo:")


def is_comm_name(n) -> bool:
    return any(map(str(n).lower().__contains__, COMM_KEYS))


def is_memcpy_name(n) -> bool:
    low = str(n).lower()
    return "memcpy" in low or "memset" in low

HOST_OP_CATS = {"cpu_op", "operator"}
ANNOTATION_CATS = {"user_annotation", "gpu_user_annotation", "mstx", "MsTx", "mstx_range"}
RUNTIME_CATS = {"cuda_runtime", "cuda_driver", "runtime", "hip_runtime", "xpu_runtime", "privateuse1_runtime"}
DEVICE_CATS = {"kernel", "gpu_memcpy", "gpu_memset", "mtia_ccp_events"}
SKIP_CATS = {"Trace", "ac2g", "flow"}
DEVICE_PROCESSES = ("Ascend Hardware", "HCCL", "Communication")
COMM_PROCESSES = ("HCCL", "Communication")
DERIVED_PROCESSES = ("Overlap Analysis",)


def _is_mstx(name) -> bool:
    return isinstance(name, str) and name.startswith(("mstx", "MsTx"))


def classify(ev: Events) -> dict[str, np.ndarray]:
    """Boolean masks over events: host_op, annotation, runtime, device, comm, memcpy, skip."""
    pname = [str(ev.process_names.get(p, "")) for p in ev.pids]
    dev_proc = ev.lookup(pname, lambda n: n.startswith(DEVICE_PROCESSES))[ev.pid] if len(ev) else np.zeros(0, bool)
    comm_proc = ev.lookup(pname, lambda n: n.startswith(COMM_PROCESSES))[ev.pid] if len(ev) else np.zeros(0, bool)
    derived = ev.lookup(pname, lambda n: n.startswith(DERIVED_PROCESSES))[ev.pid] if len(ev) else np.zeros(0, bool)
    cat = lambda s: ev.lookup(ev.cats, lambda c: c in s)[ev.cat] if len(ev) else np.zeros(0, bool)
    skip = cat(SKIP_CATS) | derived
    device = (cat(DEVICE_CATS) | dev_proc) & ~skip
    memcpy_cat = cat({"gpu_memcpy", "gpu_memset"})
    memcpy_task = ev.lookup(ev.tasks, lambda t: isinstance(t, str) and "MEMCPY" in t.upper())[ev.task] if len(ev) else memcpy_cat
    memcpy_name = ev.lookup(ev.names, is_memcpy_name)[ev.name] if len(ev) else memcpy_cat
    memcpy = device & (memcpy_cat | memcpy_task | (dev_proc & memcpy_name))
    comm_name = ev.lookup(ev.names, is_comm_name)[ev.name] if len(ev) else memcpy_cat
    comm = device & ~memcpy & (comm_proc | comm_name)
    annotation = (cat(ANNOTATION_CATS) | ev.lookup(ev.names, _is_mstx)[ev.name]) & ~device & ~skip if len(ev) else memcpy_cat
    runtime = (cat(RUNTIME_CATS) | ev.lookup(ev.names, lambda n: str(n).startswith("AscendCL@"))[ev.name]) & ~device & ~skip if len(ev) else memcpy_cat
    host_op = cat(HOST_OP_CATS) & ~device & ~skip
    return {"host_op": host_op, "annotation": annotation, "runtime": runtime, "device": device,
            "comm": comm, "memcpy": memcpy, "compute": device & ~comm & ~memcpy, "skip": skip}


def device_breakdown(ts: np.ndarray, end: np.ndarray, comp: np.ndarray, comm: np.ndarray,
                     mem: np.ndarray, window: tuple[float, float] | None = None) -> dict | None:
    """Exclusive split of device time (see module doc); None when there is no device activity."""
    dev = comp | comm | mem
    if not dev.any():
        return None
    s, e = ts[dev], end[dev]
    lo, hi = (float(s.min()), float(e.max())) if window is None else window
    def u(mask):
        a, b = intervals.clip(ts[mask], end[mask], lo, hi)
        return intervals.union_length(a, b)
    c = u(comp)
    k = u(comm)
    ck = u(comp | comm)
    busy = u(dev)
    return {
        "window_us": hi - lo,
        "busy_us": busy,
        "compute_us": c,
        "communication_us": k,
        "communication_exposed_us": ck - c,
        "communication_overlapped_us": c + k - ck,
        "memcpy_exposed_us": busy - ck,
        "idle_us": (hi - lo) - busy,
        "n_activities": int(dev.sum()),
    }


def _group_sum(keys: np.ndarray, weights: np.ndarray, n: int) -> np.ndarray:
    return np.bincount(keys, weights=weights, minlength=n) if len(keys) else np.zeros(n)


def _top(rows: list[dict], key: str, top_n: int) -> list[dict]:
    return sorted(rows, key=lambda r: -r[key])[:top_n]


def summarise(ev: Events, top_n: int = 20) -> dict:
    m = classify(ev)
    ts, dur = ev.ts, ev.dur
    end = ts + dur
    keep = ~m["skip"]
    out: dict = {"n_events": int(ev.n_raw), "n_complete_events": int(len(ev)),
                 "n_bad_events": int(ev.n_bad), "t0_us": ev.t0_us}
    if not keep.any():
        out.update(wall_us=0.0, start_us=None, steps=[], device=None, top_ops=[], top_kernels=[],
                   annotations=[])
        return out
    start = float(ts[keep].min())
    out["start_us"] = ev.t0_us + start
    out["wall_us"] = float(end[keep].max()) - start

    # steps: ProfilerStep#N annotations
    step_of = [STEP_RE.match(n) if isinstance(n, str) else None for n in ev.names]
    step_num = np.array([int(x.group(1)) if x else -1 for x in step_of], dtype=np.int64)
    # torch marks steps as user_annotation, torch_npu's trace_view as cpu_op
    is_step = (step_num[ev.name] >= 0) & (m["annotation"] | m["host_op"])
    si = np.flatnonzero(is_step)
    si = si[np.argsort(ts[si], kind="stable")]
    dev_any = m["device"]
    busy = intervals.covered_in_windows(ts[dev_any], end[dev_any], ts[si], end[si]) if dev_any.any() else None
    steps = [{"step": int(step_num[ev.name[i]]), "start_us": ev.t0_us + float(ts[i]), "dur_us": float(dur[i]),
              "device_busy_us": float(busy[k]) if busy is not None else None} for k, i in enumerate(si)]
    out["steps"] = steps
    out["device"] = device_breakdown(ts, end, m["compute"], m["comm"], m["memcpy"])

    # host nesting: ops, annotations and runtime calls on one thread form one call stack
    host = m["host_op"] | m["annotation"] | m["runtime"]
    hidx = np.flatnonzero(host)
    group = ev.pid[hidx].astype(np.int64) * (len(ev.tids) + 1) + ev.tid[hidx]
    selft, par = intervals.self_times(group, ts[hidx], dur[hidx])
    nn = len(ev.names)
    # device time per op: kernel -> runtime call (same correlation id) -> its parent op
    op_dev = np.zeros(nn)
    rt_local = np.flatnonzero(m["runtime"][hidx])
    kern = np.flatnonzero(m["device"] & (ev.corr >= 0))
    if len(rt_local) and len(kern):
        rt_corr = ev.corr[hidx[rt_local]]
        order = np.argsort(rt_corr)
        sc = rt_corr[order]
        pos = np.clip(np.searchsorted(sc, ev.corr[kern]), 0, len(sc) - 1)
        hit = sc[pos] == ev.corr[kern]
        launcher = rt_local[order[pos[hit]]]
        op_local = par[launcher]
        has_op = op_local >= 0
        op_local = op_local[has_op]
        is_op = m["host_op"][hidx[op_local]]
        np.add.at(op_dev, ev.name[hidx[op_local[is_op]]], dur[kern[hit][has_op][is_op]])

    ops = np.flatnonzero(m["host_op"][hidx] & ~is_step[hidx])
    names = ev.name[hidx[ops]]
    cnt = np.bincount(names, minlength=nn)
    tot = _group_sum(names, dur[hidx[ops]], nn)
    slf = _group_sum(names, selft[ops], nn)
    rows = [{"name": str(ev.names[i]), "count": int(cnt[i]), "total_us": float(tot[i]),
             "self_us": float(slf[i]), "device_us": float(op_dev[i])} for i in np.flatnonzero(cnt)]
    out["top_ops"] = _top(rows, "self_us", top_n)
    out["top_ops_by_device"] = _top([r for r in rows if r["device_us"] > 0], "device_us", top_n)

    dmask = m["device"]
    kn = ev.name[dmask]
    kcnt = np.bincount(kn, minlength=nn)
    ktot = _group_sum(kn, dur[dmask], nn)
    kcls = np.full(nn, "compute", dtype=object)
    kcls[ev.name[m["comm"]]] = "communication"
    kcls[ev.name[m["memcpy"]]] = "memcpy"
    out["top_kernels"] = _top([{"name": str(ev.names[i]), "count": int(kcnt[i]), "total_us": float(ktot[i]),
                                "class": kcls[i]} for i in np.flatnonzero(kcnt)], "total_us", top_n)

    amask = m["annotation"] & ~is_step
    an = ev.name[amask]
    acnt = np.bincount(an, minlength=nn)
    atot = _group_sum(an, dur[amask], nn)
    amax = np.zeros(nn)
    np.maximum.at(amax, an, dur[amask])
    out["annotations"] = _top([{"name": str(ev.names[i]), "count": int(acnt[i]), "total_us": float(atot[i]),
                                "mean_us": float(atot[i] / acnt[i]), "max_us": float(amax[i])}
                               for i in np.flatnonzero(acnt)], "total_us", top_n)
    return out
