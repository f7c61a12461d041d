"""Why a device stream sat idle, and how long kernel launches took, as HolisticTraceAnalysis (HTA
0.5.0) defines them: `TraceAnalysis.get_idle_time_breakdown()` and `get_cuda_kernel_launch_stats()`
(docs/diagnosis.md, "Idle time by cause"; tests/test_idle_causes.py compares on real traces).

Idle causes, per device stream. The stream's device activities (Kineto kernel, memcpy and memset
categories) in start order; each one's gap is its start minus the previous activity's end (the
first has none). The gap is
  - host wait: the runtime call that launched the activity (same correlation id) started after the
    previous activity ended: the host had not enqueued it yet;
  - kernel wait: otherwise, a gap shorter than 30 us (HTA's consecutive_kernel_delay, applied to
    the trace's microseconds): the cost of launching back-to-back kernels;
  - other: otherwise (waiting on an event of another stream, a synchronisation, ...).
As in HTA, a negative gap (activities overlapping on one stream) is summed as it is, and where the
trace has two ProfilerStep ranges or more, an activity with a correlation id no host event carries
(launched before the trace began) is left out.

Launch statistics, per capture. Each device activity joined by correlation id to its launch call
(cudaLaunchKernel, cudaLaunchKernelExC, cudaMemcpyAsync, cudaMemsetAsync, MTIA's runFunction: HTA's
names): the launch delay is the activity's start minus the call's end, 0 when negative; the call's
duration against the activity's.
"""
from __future__ import annotations

import re

import numpy as np

from mindspeed_profiler.analysis.models.rows import Field, RowModel, block, each_capture, listed
from .classify import DEVICE_CATS, ClassifiedTrace
from .grouping import distinct, median, member

CONSECUTIVE_KERNEL_DELAY_US = 30.0     # HTA's default (its docstring says ns; it compares trace us)
LAUNCH_NAMES = frozenset({"cudaLaunchKernel", "cudaLaunchKernelExC", "cudaMemcpyAsync", "cudaMemsetAsync",
                          "runFunction - job_prep_and_submit_for_execution"})
RUNTIME_CUTOFF_US = 50.0               # HTA's runtime_cutoff: a launch call longer than this is an outlier
LAUNCH_DELAY_CUTOFF_US = 100.0         # HTA's launch_delay_cutoff
_STREAM_RE = re.compile(r"^(?:stream\s*)?(\d{1,18})$")

HOST_WAIT, KERNEL_WAIT, OTHER = 0, 1, 2


def stream_number(tid) -> int | None:
    """The stream of a device activity's thread: Kineto writes it as the tid (7, "7", "stream 7")."""
    if isinstance(tid, (int, np.integer)) and not isinstance(tid, bool):
        return int(tid)
    m = _STREAM_RE.match(str(tid).strip())
    return int(m.group(1)) if m else None


def gap_causes(ts: np.ndarray, end: np.ndarray, launch_ts: np.ndarray,
               delay_us: float = CONSECUTIVE_KERNEL_DELAY_US) -> tuple[np.ndarray, np.ndarray]:
    """(gap, cause) of one stream's activities, already in start order (launch_ts NaN where no
    launch was matched): gap[k] = ts[k] - end[k-1], cause HOST_WAIT / KERNEL_WAIT / OTHER; the first
    activity has no gap (NaN, OTHER)."""
    n = len(ts)
    gap = np.full(n, np.nan)
    cause = np.full(n, OTHER, dtype=np.int8)
    if n < 2:
        return gap, cause
    prev_end = end[:-1]
    gap[1:] = ts[1:] - prev_end
    with np.errstate(invalid="ignore"):
        host = launch_ts[1:] > prev_end       # NaN (no launch) compares False
    kern = ~host & (gap[1:] < delay_us)
    cause[1:] = np.where(host, HOST_WAIT, np.where(kern, KERNEL_WAIT, OTHER))
    return gap, cause


def last_by_corr(corr: np.ndarray, values: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """For each id of `wanted`, the value of the last event (in trace order) carrying it, NaN where
    none does (HTA's index_correlation keeps the last)."""
    out = np.full(len(wanted), np.nan)
    if not len(corr):
        return out
    o = np.argsort(corr, kind="stable")
    c = corr[o]
    k = np.searchsorted(c, wanted, side="right") - 1
    hit = (k >= 0) & (c[np.maximum(k, 0)] == wanted)
    out[hit] = values[o][k[hit]]
    return out


def _stream_activities(ct: ClassifiedTrace) -> np.ndarray:
    """Indices of the device activities HTA's idle breakdown counts (see module doc)."""
    ev, m = ct.ev, ct.m
    kin = m["device"] & ev.lookup(ev.cats, lambda c: c in DEVICE_CATS)[ev.cat]
    idx = np.flatnonzero(kin)
    n_steps = sum(1 for n in ev.names if isinstance(n, str) and "ProfilerStep" in n)
    if n_steps >= 2 and len(idx):
        host_corr = distinct(ev.corr[~kin & (ev.corr >= 0)])
        c = ev.corr[idx]
        idx = idx[(c < 0) | member(c, host_corr)]
    return idx


def idle_causes(ct: ClassifiedTrace, delay_us: float = CONSECUTIVE_KERNEL_DELAY_US) -> list[dict]:
    """One row per device stream (see module doc), by device then stream."""
    ev, m = ct.ev, ct.m
    idx = _stream_activities(ct)
    if not len(idx):
        return []
    rt = np.flatnonzero(m["runtime"] & (ev.corr >= 0))
    launch_ts = last_by_corr(ev.corr[rt], ct.ts[rt], ev.corr[idx])
    rows = []
    key = ev.pid[idx].astype(np.int64) * (len(ev.tids) + 1) + ev.tid[idx]
    for k in distinct(key):
        sel = key == k
        o = np.argsort(ct.ts[idx[sel]], kind="stable")
        i = idx[sel][o]
        gap, cause = gap_causes(ct.ts[i], ct.end[i], launch_ts[sel][o], delay_us)
        has = ~np.isnan(gap)
        tot = {c: float(gap[has & (cause == c)].sum()) for c in (HOST_WAIT, KERNEL_WAIT, OTHER)}
        cnt = {c: int((has & (cause == c)).sum()) for c in (HOST_WAIT, KERNEL_WAIT, OTHER)}
        pid, tid = ev.pids[int(ev.pid[i[0]])], ev.tids[int(ev.tid[i[0]])]
        rows.append(IDLE_CAUSES.row(
            device=str(pid), stream_id=stream_number(tid), thread=str(tid), n_activities=int(len(i)),
            idle_us=tot[HOST_WAIT] + tot[KERNEL_WAIT] + tot[OTHER],
            host_wait_us=tot[HOST_WAIT], kernel_wait_us=tot[KERNEL_WAIT], other_us=tot[OTHER],
            n_host_wait=cnt[HOST_WAIT], n_kernel_wait=cnt[KERNEL_WAIT], n_other=cnt[OTHER],
            n_launched=int(np.count_nonzero(~np.isnan(launch_ts[sel]))),
        ))
    rows.sort(key=lambda r: (r["device"], r["stream"] if r["stream"] is not None else -1, r["thread"]))
    return rows


def _launch_groups(ct: ClassifiedTrace) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(hs, lo, cnt, dev): the launch-side events sorted by correlation id (hs), and per device
    activity (dev) the run hs[lo:lo + cnt] of those carrying its id. HTA's launch statistics join
    every call with every activity of an id (see launch_pairs)."""
    ev, m = ct.ev, ct.m
    empty = np.zeros(0, np.int64)
    named = ev.lookup(ev.names, lambda n: n in LAUNCH_NAMES)[ev.name] & ~m["device"] & (ev.corr >= 0)
    if not named.any():
        return empty, empty, empty, empty
    in_ids = member(ev.corr, distinct(ev.corr[named]))
    kin = m["device"] & ev.lookup(ev.cats, lambda c: c in DEVICE_CATS)[ev.cat]
    host = np.flatnonzero(~m["device"] & ~m["device_annotation"] & in_ids)
    dev = np.flatnonzero(kin & in_ids)
    hs = host[np.argsort(ev.corr[host], kind="stable")]
    hc, dc = ev.corr[hs], ev.corr[dev]
    lo = np.searchsorted(hc, dc, side="left")
    cnt = np.searchsorted(hc, dc, side="right") - lo
    return hs, lo, cnt, dev


def _pairs(hs: np.ndarray, lo: np.ndarray, cnt: np.ndarray, dev: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(call index, activity index) of the pairs of these activities: each repeated once per call."""
    total = int(cnt.sum())
    offs = np.arange(total) - np.repeat(np.cumsum(cnt) - cnt, cnt)
    return hs[np.repeat(lo, cnt) + offs].astype(np.int64), np.repeat(dev, cnt).astype(np.int64)


def launch_pairs(ct: ClassifiedTrace) -> tuple[np.ndarray, np.ndarray]:
    """(launch call index, device activity index) of every pair HTA's launch statistics join: the
    same correlation id, the call one of LAUNCH_NAMES (every pair where an id repeats)."""
    return _pairs(*_launch_groups(ct))


# pairs built at a time: where ids repeat, the pairs grow as calls x activities per id (a trace made
# of copies of one window, ids and all: 300 copies made 1.2e8 pairs, 5.5 GB of index arrays at once)
PAIR_CHUNK = 1 << 22


def launch_stats(ct: ClassifiedTrace) -> dict | None:
    """The capture's kernel launch statistics (see module doc); None without a matched launch.
    The pairs are made PAIR_CHUNK at a time (only their delays are kept, for the median); one chunk
    (any real trace: ids repeat little) sums as numpy sums the whole array, more add chunk sums."""
    hs, lo, cnt, dev = _launch_groups(ct)
    total = int(cnt.sum())
    if not total:
        return None
    delay_all = np.empty(total)
    sums = np.zeros(3)          # cpu, device, delay
    long_calls = shorter = long_delays = 0
    delay_max = -np.inf
    ends = np.cumsum(cnt)
    a, pos = 0, 0
    while a < len(dev):
        # activities a..b-1: about PAIR_CHUNK pairs (one activity with more goes alone)
        b = max(a + 1, int(np.searchsorted(ends, (ends[a - 1] if a else 0) + PAIR_CHUNK, side="right")))
        h, d = _pairs(hs, lo[a:b], cnt[a:b], dev[a:b])
        cpu, dv = ct.dur[h], ct.dur[d]
        delay = np.maximum(ct.ts[d] - ct.ts[h] - cpu, 0.0)
        del h, d
        n = len(delay)
        if n:
            sums += (cpu.sum(), dv.sum(), delay.sum())
            delay_max = max(delay_max, float(delay.max()))
            shorter += int(np.count_nonzero(dv < cpu))
            long_calls += int(np.count_nonzero(cpu > RUNTIME_CUTOFF_US))
            long_delays += int(np.count_nonzero(delay > LAUNCH_DELAY_CUTOFF_US))
            delay_all[pos:pos + n] = delay
        pos += n
        a = b
    return KERNEL_LAUNCHES.row(
        n_launches=total,
        launch_delay_mean_us=float(sums[2] / total), launch_delay_median_us=median(delay_all),
        launch_delay_max_us=delay_max,
        cpu_duration_mean_us=float(sums[0] / total), cpu_duration_total_us=float(sums[0]),
        device_duration_mean_us=float(sums[1] / total), device_duration_total_us=float(sums[1]),
        n_device_shorter=shorter, n_long_calls=long_calls, n_long_delays=long_delays,
    )


def trace_idle_causes(ct: ClassifiedTrace) -> dict:
    """A capture's summary.json fields: idle_causes (per stream) and kernel_launches (when any)."""
    out: dict = {}
    IDLE_CAUSES.put(out, idle_causes(ct))
    ls = launch_stats(ct)
    if ls is not None:
        KERNEL_LAUNCHES.put(out, ls)
    return out


IDLE_CAUSES = RowModel(
    "idle_causes", "device stream of a capture (Kineto)", "captures[*].idle_causes[*]", table="idle_causes",
    method="idle_causes", select=each_capture(listed("idle_causes")), fields=(
        Field("device", "text", "the device (the trace's pid)"),
        Field("stream", "id", "the stream (Kineto's tid: 7 or 'stream 7')", code="stream_id"),
        Field("thread", "text", "the stream's tid as the trace writes it"),
        Field("n_activities", "count", "kernels, memcpy and memset on the stream"),
        Field("idle_us", "us", "summed gaps between consecutive activities = host_wait + kernel_wait + other"),
        Field("host_wait_us", "us", "gaps whose next activity's launch call started after the previous one ended"),
        Field("kernel_wait_us", "us", "other gaps under 30 us (back-to-back launch overhead)"),
        Field("other_us", "us", "the remaining gaps (waits on other streams, synchronisation, ...)"),
        Field("n_host_wait", "count", "gaps counted as host wait"),
        Field("n_kernel_wait", "count", "gaps counted as kernel wait"),
        Field("n_other", "count", "gaps counted as other"),
        Field("n_launched", "count", "activities whose launch call (same correlation id) is in the trace"),
    ))

KERNEL_LAUNCHES = RowModel(
    "kernel_launches", "capture with a matched kernel launch (Kineto)", "captures[*].kernel_launches",
    table="kernel_launches", method="kernel_launches", primary="capture_id",
    select=each_capture(block("kernel_launches")), fields=(
        Field("n_launches", "count", "(launch call, device activity) pairs joined by correlation id"),
        Field("launch_delay_mean_us", "us", "activity start - call end (0 when negative), mean"),
        Field("launch_delay_median_us", "us", "the same, median"),
        Field("launch_delay_max_us", "us", "the same, largest"),
        Field("cpu_duration_mean_us", "us", "launch call duration, mean"),
        Field("cpu_duration_total_us", "us", "launch call duration, summed"),
        Field("device_duration_mean_us", "us", "device activity duration, mean"),
        Field("device_duration_total_us", "us", "device activity duration, summed"),
        Field("n_device_shorter", "count", "activities shorter than their launch call (launch-bound)"),
        Field("n_long_calls", "count", "launch calls over 50 us (HTA's runtime_cutoff)"),
        Field("n_long_delays", "count", "launch delays over 100 us (HTA's launch_delay_cutoff)"),
    ))
