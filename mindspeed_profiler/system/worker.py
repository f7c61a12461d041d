"""Inside a wrapped worker: follow its iterations, write their boundaries, and open / close the CUDA
profiler range exactly around each listed step.

The launch settings put the worker's `WorkerSpec` in its environment (formats.SYSTEM_ENV); session.py
reads it once, at the first IntegratedProfiler.start of the process, and calls `install()`, which
subscribes a process-wide observer (observers.py). IntegratedProfiler.start / step / stop then tell it
where iterations begin and end, also when `integrated.profile` is false. Nothing here raises into
training: a failing observer is reported once and training carries on.
"""
from __future__ import annotations

import io
import json
import os
import socket
import sys
import time
from typing import IO, Any

from mindspeed_profiler.core import formats
from mindspeed_profiler.core.fileio import open_append
from mindspeed_profiler.capture.observers import ObservedProfiler, Observer, subscribe
from mindspeed_profiler.system.backends import STEPS_PROFILER_API, system_backend
from mindspeed_profiler.system.spec import WorkerSpec, spec_from_env


class ProfilerRange:
    """The seam around cudaProfilerStart / cudaProfilerStop (torch.cuda.profiler.start / stop).

    On a machine without CUDA the calls are only recorded (`mode` "recorded"), so that tests on a CPU
    see exactly when a GPU run would have opened and closed the range. Tests may replace
    `PROFILER_RANGE` with their own object having the same two methods."""

    def _cuda(self) -> Any:
        try:
            import torch

            return torch.cuda.profiler if torch.cuda.is_available() else None
        except Exception:
            return None

    def start(self) -> str:
        api = self._cuda()
        if api is None:
            return "recorded"
        api.start()
        return "cuda"

    def stop(self) -> str:
        api = self._cuda()
        if api is None:
            return "recorded"
        api.stop()
        return "cuda"


PROFILER_RANGE = ProfilerRange()


class IterationFollower(Observer):
    """The process-wide observer: the process's iteration is the highest of its running profilers'
    (colocated roles each run one); each change ends the old iteration and begins the new one."""

    def __init__(self, spec: WorkerSpec, records: "RecordWriter"):
        self.spec = spec
        self.records = records
        self.listed = frozenset(spec.steps or ())
        self.drive_range = bool(spec.steps) and system_backend(spec.backend).steps_mode == STEPS_PROFILER_API
        self._iterations: dict[int, int] = {}   # id(profiler) -> its current iteration
        self.current: int | None = None
        self._begin_ns = 0
        self._range_open = False

    def started(self, profiler: ObservedProfiler, iteration: int) -> None:
        self._follow(profiler, iteration)

    def step(self, profiler: ObservedProfiler, iteration: int) -> None:
        self._follow(profiler, iteration)

    def stopped(self, profiler: ObservedProfiler, iteration: int | None) -> None:
        self._follow(profiler, None)

    def _follow(self, profiler: ObservedProfiler, iteration: int | None) -> None:
        if iteration is None:
            self._iterations.pop(id(profiler), None)
        else:
            self._iterations[id(profiler)] = iteration
        new = max(self._iterations.values(), default=None)
        if new != self.current:
            self._end()
            self._begin(new)

    def _begin(self, iteration: int | None) -> None:
        self.current = iteration
        if iteration is None:
            return
        self._begin_ns = time.time_ns()
        if self.drive_range and iteration in self.listed:
            self._range_open = self._range("start", iteration)

    def _end(self) -> None:
        it = self.current
        if it is None:
            return
        if self._range_open:
            self._range_open = False
            self._range("stop", it)
        self.records.write({"type": formats.SYS_ITERATION, "iteration": it, "begin_wall_ns": self._begin_ns,
                            "end_wall_ns": time.time_ns(), "listed": it in self.listed})

    def _range(self, call: str, iteration: int) -> bool:
        """One cudaProfilerStart / Stop, recorded; a failing call is recorded and reported once."""
        try:
            mode, ok = getattr(PROFILER_RANGE, call)(), True
        except Exception as exc:
            from mindspeed_profiler.core.warn import warn_once

            mode, ok = f"failed: {type(exc).__name__}: {exc}", False
            warn_once(("system-range", call), "process-level capture: CUDA profiler %s failed at iteration %d "
                      "(training goes on): %s: %s", call, iteration, type(exc).__name__, exc)
        self.records.write({"type": formats.SYS_RANGE, "call": call, "iteration": iteration,
                            "wall_ns": time.time_ns(), "mode": mode})
        return ok


class RecordWriter:
    """Appends JSON lines to the worker's iterations file (opened on the first record, with a
    "worker" header: pid, host, clock anchor); each line is flushed, so a crash loses nothing."""

    def __init__(self, spec: WorkerSpec):
        self.spec = spec
        self._fh: IO[str] | None = None

    def write(self, record: dict[str, Any]) -> None:
        """Never raises: a record that cannot be written is reported once and the follower goes on
        (it still drives the profiler range of the listed iterations)."""
        try:
            if self._fh is None:
                path = self.spec.iterations_path
                path.parent.mkdir(parents=True, exist_ok=True)
                # a FIFO or a link at the path is refused, never waited on: this runs inside step()
                self._fh = io.TextIOWrapper(open_append(path), encoding="utf-8", line_buffering=True)
                self._fh.write(json.dumps(header(self.spec)) + "\n")
            self._fh.write(json.dumps(record) + "\n")
        except Exception as exc:
            from mindspeed_profiler.core.warn import warn_once

            warn_once(("system-records", str(self.spec.iterations_path)), "process-level capture: cannot write %s "
                      "(training goes on; the capture's iteration records are lost): %s: %s",
                      self.spec.iterations_path, type(exc).__name__, exc)


def header(spec: WorkerSpec) -> dict[str, Any]:
    return {"type": formats.SYS_WORKER, "schema": formats.SYSTEM_SCHEMA, "run_id": spec.run_id, "backend": spec.backend,
            "group": spec.group, "rank": spec.rank, "steps": list(spec.steps) if spec.steps else None,
            "pid": os.getpid(), "host": socket.gethostname(),
            "clock": {"wall_ns": time.time_ns(), "mono_ns": time.monotonic_ns()}}


def launch_status(environ: Any = os.environ) -> dict[str, Any]:
    """What the launcher said before it started this interpreter: {"status": "wrapped" | "unwrapped",
    "reason", "tool_path"}; {} when no launcher ran (the runtime_env was not applied)."""
    try:
        return json.loads(environ.get(formats.SYSTEM_STATUS_ENV) or "{}")
    except ValueError:
        return {}


def mindspeed_profiler_clock_mark(seconds: float) -> tuple[int, int]:
    """Stay busy (a sampler skips idle threads) in a function with a name of its own for `seconds`:
    its first and last sample, found again in the report, tie the tool's clock to this wall clock.
    The name is formats.CLOCK_MARK_FUNCTION."""
    begin = time.time_ns()
    end = begin + int(seconds * 1e9)
    now = begin
    while now < end:
        now = time.time_ns()
    return begin, now


def clock_mark_seconds(rate_hz: float | None) -> float:
    """Long enough for several samples at the tool's rate (10 samples, at least 100 ms): the mark runs
    as the worker starts, when a busy machine can hold py-spy back for a few sample periods (with 5,
    a 50 ms stall would lose the mark and the alignment would fall back to the exec time)."""
    return max(0.1, 10.0 / rate_hz) if rate_hz else 0.1


_FOLLOWER: IterationFollower | None = None


def install() -> bool:
    """Follow this process's iterations when it runs wrapped by a system tool. Idempotent."""
    global _FOLLOWER
    spec = spec_from_env()
    if spec is None or _FOLLOWER is not None or launch_status().get("status") != "wrapped":
        return _FOLLOWER is not None
    records = RecordWriter(spec)
    backend = system_backend(spec.backend)
    if backend.clock_mark:
        begin, end = mindspeed_profiler_clock_mark(clock_mark_seconds(backend.sample_rate_hz(spec)))
        records.write({"type": formats.SYS_CLOCK, "function": formats.CLOCK_MARK_FUNCTION, "begin_wall_ns": begin,
                       "end_wall_ns": end, "rate_hz": backend.sample_rate_hz(spec)})
    _FOLLOWER = IterationFollower(spec, records)
    subscribe(_FOLLOWER)
    return True


def worker_status(_actor: Any = None) -> dict[str, Any]:
    """This worker's process-level capture, for the driver (called in the actor through Ray's
    `__ray_call__`, hence the ignored first argument): group, rank, tool status, where it runs and
    where its files are. {} when the worker is not wrapped."""
    spec = spec_from_env()
    if spec is None:
        return {}
    launched = launch_status()
    if _FOLLOWER is None and "mindspeed_profiler.runtime.session" in sys.modules:
        # the session follows from the first profiler start on (it used to at its import): a status
        # asked before then answers as that start will
        install()
    node_id = None
    try:
        import ray

        node_id = ray.get_runtime_context().get_node_id()
    except Exception:
        pass
    return {"group": spec.group, "rank": spec.rank, "backend": spec.backend, "tool": system_backend(spec.backend).tool,
            "status": launched.get("status", "unwrapped"),
            "reason": launched.get("reason") or (None if launched else "the launcher did not run (runtime_env not applied?)"),
            "tool_path": launched.get("tool_path"), "host": socket.gethostname(), "pid": os.getpid(), "node_id": node_id,
            "meta": str(spec.meta_path), "report": str(spec.report_path), "output_dir": spec.output_dir,
            "following_iterations": _FOLLOWER is not None}


