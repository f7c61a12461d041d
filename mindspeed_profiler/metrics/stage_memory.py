"""Per-stage memory, always on with the metrics tracker: for every stage call, the device's peak of
allocated and reserved bytes, the process's resident (host) peak, and the bytes an offload / onload
marked inside it moved (offload.py).

How a peak is per stage: at a stage's entry the allocator's peak statistics are reset
(`reset_peak_memory_stats`) and so is the kernel's resident high-water mark (runtime/host_memory.py:
/proc/self/clear_refs); at its exit both peaks are read. A stage entered while another is open (a
nested stage) first folds the peaks so far into the open calls, so each call's figure covers all of
its own time. Time outside every stage counts only in the iteration's figure, read at step() (it
covers the iteration's last stage and what followed it; the gaps between two stages belong to no
stage).

What it keeps is bounded: this iteration's finished calls (MAX_CALLS_PER_ITERATION, then counted in
`dropped`), one aggregate per stage name (MAX_STAGES), the run's maximum per stage name, and the
last RECENT_CALLS calls' wall-clock ranges (an out-of-memory snapshot's allocations are attributed to
stages with them). Nothing raises into training: a device read that fails is noted once and the
device is left out from then on.
"""
from __future__ import annotations

import json
import time
from collections import deque
from typing import Any

from mindspeed_profiler.metrics.device_memory import DeviceMemory, find_device
from mindspeed_profiler.runtime.host_memory import HostPeak

MAX_CALLS_PER_ITERATION = 1024   # stage calls kept per iteration for the stage-call lines (the rest: counted)
MAX_STAGES = 256                 # stage names aggregated per iteration and over the run
RECENT_CALLS = 256               # wall-clock ranges of the last stage calls, for an out-of-memory record
CALL_FIELDS = ("device_allocated_peak", "device_reserved_peak", "host_peak", "offload_bytes", "onload_bytes")
# every meter's open stage calls, innermost last: the peak counters are the process's, so a stage of
# one tracker entered inside another's folds the peaks into both; an offload / onload's bytes go to
# the innermost (offload.py)
OPEN: list["StageCall"] = []


class StageCall:
    """One stage call's memory: its wall-clock range and its peaks (bytes; None: not measured)."""

    __slots__ = ("stage", "iteration", "start_ns", "end_ns", "device_allocated_peak", "device_reserved_peak",
                 "host_peak", "offload_bytes", "onload_bytes", "_dev_fold", "_host_fold", "failed")

    def __init__(self, stage: str, iteration: int | None):
        self.stage, self.iteration = stage, iteration
        self.start_ns = time.time_ns()
        self.end_ns: int | None = None
        self.device_allocated_peak = self.device_reserved_peak = self.host_peak = None
        self.offload_bytes = self.onload_bytes = 0
        self._dev_fold = (0, 0)   # the peaks before a nested stage reset them
        self._host_fold = 0
        self.failed: str | None = None   # the exception type the call ended with

    def line(self) -> dict[str, Any]:
        """The call's stage-call line (docs/memory.md "Files")."""
        row: dict[str, Any] = {"type": "stage", "iteration": self.iteration, "stage": self.stage,
                               "start_ns": self.start_ns, "end_ns": self.end_ns}
        for name in CALL_FIELDS:
            value = getattr(self, name)
            if value is not None:
                row[name] = value
        if self.failed:
            row["failed"] = self.failed
        return row

    def line_text(self, quoted: dict[str, str]) -> str:
        """line() as its JSON text, made here (json.dumps of the dict: ~5 us a line; this ~1.5 us):
        every value is an int or None but the stage name and the exception's name, quoted by JSON
        once per name (`quoted`: the cache)."""
        stage = quoted.get(self.stage)
        if stage is None:
            stage = quoted[self.stage] = json.dumps(self.stage)
        parts = [f'{{"type":"stage","iteration":{"null" if self.iteration is None else self.iteration},"stage":{stage},'
                 f'"start_ns":{self.start_ns},"end_ns":{"null" if self.end_ns is None else self.end_ns}']
        for name in CALL_FIELDS:
            value = getattr(self, name)
            if value is not None:
                parts.append(f',"{name}":{value}')
        if self.failed:
            parts.append(f',"failed":{json.dumps(self.failed)}')
        parts.append("}\n")
        return "".join(parts)


def _max(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else max(a, b)


class StageMemory:
    """The per-stage meter of one tracker (see the module docstring)."""

    def __init__(self) -> None:
        self.host = HostPeak()
        self.device: DeviceMemory | None = None
        self.device_capacity: int | None = None
        self.open: list[StageCall] = []
        self.calls: list[StageCall] = []      # this iteration's finished calls
        self.dropped = 0                      # ... and those past MAX_CALLS_PER_ITERATION
        self.per_stage: dict[str, list[Any]] = {}            # stage -> [calls, 5 CALL_FIELDS] this iteration
        self.run_peaks: dict[str, list[int | None]] = {}     # stage -> the run's (allocated, reserved, host) peaks
        self.recent: deque[tuple[str, int | None, int, int | None]] = deque(maxlen=RECENT_CALLS)
        self.iteration_peaks: tuple[int | None, int | None, int | None] = (None, None, None)
        self.notes: list[str] = []

    # ------------------------------------------------------------------ the device

    def probe(self) -> None:
        """Look for the device once per iteration until found (a process may use it only later)."""
        if self.device is not None:
            return
        self.device = find_device()
        if self.device is not None:
            try:
                self.device_capacity = self.device.capacity()
            except Exception:
                self.device_capacity = None

    def _device_failed(self, exc: Exception) -> None:
        self.notes.append(f"device memory not read from then on ({self.device.kind if self.device else '?'}): "
                          f"{type(exc).__name__}: {exc}")
        self.device = None

    # ------------------------------------------------------------------ a stage call

    def enter(self, stage: str, iteration: int | None) -> StageCall:
        if OPEN:   # a nested stage (of any tracker: the counters are the process's): what the open calls reached
            self._fold_open()
        dev = self.device
        if dev is not None:
            try:
                dev.reset_peaks()
            except Exception as exc:
                self._device_failed(exc)
        self.host.reset()
        call = StageCall(stage, iteration)
        self.open.append(call)
        OPEN.append(call)
        return call

    def exit(self, call: StageCall, failed: str | None = None) -> StageCall:
        call.end_ns = time.time_ns()
        call.failed = failed
        host = self.host.peak_bytes()
        call.host_peak = _max(host, call._host_fold or None) if host is not None else None
        dev = self.device
        if dev is not None:
            try:
                alloc, reserved = dev.peaks()
                call.device_allocated_peak = max(alloc, call._dev_fold[0])
                call.device_reserved_peak = max(reserved, call._dev_fold[1])
            except Exception as exc:
                self._device_failed(exc)
        for stack in (self.open, OPEN):
            if stack and stack[-1] is call:
                stack.pop()
            elif call in stack:
                stack.remove(call)
        self._keep(call)
        return call

    def _fold_open(self) -> None:
        host = self.host.peak_bytes() or 0
        dev = (0, 0)
        if self.device is not None:
            try:
                dev = self.device.peaks()
            except Exception as exc:
                self._device_failed(exc)
        for c in OPEN:
            c._host_fold = max(c._host_fold, host)
            c._dev_fold = (max(c._dev_fold[0], dev[0]), max(c._dev_fold[1], dev[1]))

    def _keep(self, call: StageCall) -> None:
        if len(self.calls) < MAX_CALLS_PER_ITERATION:
            self.calls.append(call)
        else:
            self.dropped += 1
        self.recent.append((call.stage, call.iteration, call.start_ns, call.end_ns))
        agg = self.per_stage.get(call.stage)
        if agg is None:
            if len(self.per_stage) >= MAX_STAGES:
                return
            agg = self.per_stage[call.stage] = [0, None, None, None, 0, 0]
        agg[0] += 1
        agg[1] = _max(agg[1], call.device_allocated_peak)
        agg[2] = _max(agg[2], call.device_reserved_peak)
        agg[3] = _max(agg[3], call.host_peak)
        agg[4] += call.offload_bytes
        agg[5] += call.onload_bytes
        run = self.run_peaks.get(call.stage)
        if run is None and len(self.run_peaks) < MAX_STAGES:
            run = self.run_peaks[call.stage] = [None, None, None]
        if run is not None:
            run[0] = _max(run[0], call.device_allocated_peak)
            run[1] = _max(run[1], call.device_reserved_peak)
            run[2] = _max(run[2], call.host_peak)

    # ------------------------------------------------------------------ the iteration

    def end_iteration(self) -> tuple[list[StageCall], dict[str, list[Any]], int]:
        """This iteration's (calls, per-stage aggregates, dropped calls), handed over and cleared;
        its own peaks (the stages' and the time after the last one) in `iteration_peaks`."""
        host = self.host.peak_bytes()
        dev_alloc = dev_res = None
        if self.device is not None and not OPEN:
            try:
                dev_alloc, dev_res = self.device.peaks()
            except Exception as exc:
                self._device_failed(exc)
        for agg in self.per_stage.values():
            dev_alloc, dev_res, host = _max(dev_alloc, agg[1]), _max(dev_res, agg[2]), _max(host, agg[3])
        self.iteration_peaks = (dev_alloc, dev_res, host)
        out = (self.calls, self.per_stage, self.dropped)
        self.calls, self.per_stage, self.dropped = [], {}, 0
        if not OPEN:   # the next iteration's time outside stages starts from here (no stage of any tracker open)
            if self.device is not None:
                try:
                    self.device.reset_peaks()
                except Exception as exc:
                    self._device_failed(exc)
            self.host.reset()
        return out

    def close(self) -> None:
        self.host.close()


def moved(direction: str, nbytes: int) -> StageCall | None:
    """Bytes an offload ("offload") or onload ("onload") moved, added to the innermost open stage
    call of any meter of this process; that call, or None when no stage is open."""
    if not OPEN:
        return None
    call = OPEN[-1]
    if direction == "offload":
        call.offload_bytes += nbytes
    else:
        call.onload_bytes += nbytes
    return call
