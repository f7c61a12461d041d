"""The metrics tracker: per-iteration timings, throughput and MFU, one JSON line per iteration.

An observer (observers.py) the profiler adds to its own when `profiler_config.metrics.enable` is
true, also with `integrated.profile: false`. It times every stage call (wall time, summed per stage
per iteration), takes the iteration's wall time from the profiler (from start() / step() to the
next step() / stop(), the moments its timeline span opens and closes), and at each step() writes
the iteration that ended as one line of `<output_dir>/<role>_rank<R>.jsonl`, keys as the RL
frameworks name them (docs/metrics.md defines each):

    iteration, timing_s/<stage>, timing_s/iteration, perf/tokens, perf/samples, perf/<count>,
    perf/throughput, perf/throughput/<stage>, perf/mfu/<stage>, perf/max_memory_allocated_gb,
    perf/max_memory_reserved_gb, perf/max_host_memory_gb, perf/memory_capacity_gb, and per stage
    perf/max_memory_allocated_gb/<stage>, ..._reserved_gb/<stage>, perf/max_host_memory_gb/<stage>,
    perf/offload_gb/<stage>, perf/onload_gb/<stage>

The memory keys come from memory_tracking.py (per stage call: the device's and the host's peaks; an
out-of-memory error's record; the host watermark: docs/memory.md). `prof.metrics()` returns the last
row. Nothing here raises into training: a file that cannot be written, or TensorBoard missing, is
reported once and the iterations go on.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from mindspeed_profiler.core import formats
from mindspeed_profiler.core.warn import new_scope, warn_once
from mindspeed_profiler.core.fileio import open_append
from mindspeed_profiler.metrics.peaks import peak_tflops
from mindspeed_profiler.capture.observers import ObservedProfiler, Observer
from mindspeed_profiler.metrics.device_memory import used_namespaces
from mindspeed_profiler.metrics.memory_tracking import MemoryTracking
from mindspeed_profiler.runtime.manifest import resolve_run_id
from mindspeed_profiler.runtime.ranks import resolve_rank

TRAIN_STAGE_WORDS, is_train_stage = formats.TRAIN_STAGE_WORDS, formats.is_train_stage   # the advisor reads the same
GIB = 2**30


flops_per_token = formats.flops_per_token


def iteration_row(iteration: int, wall_s: float, stage_s: dict[str, float], counts: dict[str, int],
                  parameters: int | None, peak: float | None, max_memory_gb: float | None = None,
                  memory: dict[str, float] | None = None) -> dict[str, Any]:
    """Pure: one iteration's row from its measurements (the keys of docs/metrics.md, in that order)."""
    row: dict[str, Any] = {"iteration": iteration}
    for stage, seconds in stage_s.items():
        row[f"timing_s/{stage}"] = seconds
    row["timing_s/iteration"] = wall_s
    tokens = counts.get("tokens")
    for name in ("tokens", "samples"):
        if name in counts:
            row[f"perf/{name}"] = counts[name]
    for name, value in counts.items():
        if name not in ("tokens", "samples"):
            row[f"perf/{name}"] = value
    if tokens is not None:
        if wall_s > 0:
            row["perf/throughput"] = tokens / wall_s
        for stage, seconds in stage_s.items():
            if seconds > 0:
                row[f"perf/throughput/{stage}"] = tokens / seconds
        if parameters and peak:
            for stage, seconds in stage_s.items():
                if seconds > 0:
                    row[f"perf/mfu/{stage}"] = tokens * flops_per_token(stage, parameters) / (seconds * peak * 1e12)
    if parameters:   # what the MFU is made of, so that the analysis can recompute it (analyse --peak-tflops)
        row["perf/model_parameters"] = parameters
    if peak and parameters and tokens is not None:
        row["perf/peak_tflops"] = peak
    if max_memory_gb is not None:
        row["perf/max_memory_allocated_gb"] = max_memory_gb
    for key, value in (memory or {}).items():   # the reserved peak and the capacity (device_memory_gb)
        row[f"perf/{key}"] = value
    return row


_device_modules = used_namespaces   # torch_npu.npu, torch.cuda: those this process used (device_memory.py)


def max_memory_allocated_gb() -> float | None:
    """The process's peak of allocated device memory, GiB (torch.npu / torch.cuda), or None."""
    for mod in _device_modules():
        try:
            return mod.max_memory_allocated() / GIB
        except Exception:
            continue
    return None


def device_memory_gb() -> dict[str, float]:
    """The reserved peak (max_memory_reserved) and the device's capacity (get_device_properties'
    total_memory), GiB: what the advisor's memory rule compares. Empty on a CPU."""
    for mod in _device_modules():
        out: dict[str, float] = {}
        try:
            out["max_memory_reserved_gb"] = mod.max_memory_reserved() / GIB
        except Exception:
            pass
        try:
            out["memory_capacity_gb"] = mod.get_device_properties(mod.current_device()).total_memory / GIB
        except Exception:
            pass
        return out
    return {}


def device_name() -> str | None:
    for mod in _device_modules():
        try:
            return str(mod.get_device_name())
        except Exception:
            continue
    return None


class _StageTimer:
    """A stage call's wall time, and inside it (outside the timed body) its memory."""

    __slots__ = ("tracker", "name", "iteration", "t0", "call")

    def __init__(self, tracker: "MetricsTracker", name: str, iteration: int | None):
        self.tracker, self.name, self.iteration = tracker, name, iteration

    def __enter__(self) -> "_StageTimer":
        self.call = self.tracker.memory.enter(self.name, self.iteration)
        self.t0 = time.perf_counter()
        return self

    def __exit__(self, *exc: Any) -> bool:
        spent = time.perf_counter() - self.t0
        stages = self.tracker._stage_s
        stages[self.name] = stages.get(self.name, 0.0) + spent
        self.tracker.memory.exit(self.call, exc[1] if exc else None)
        return False   # an exception goes on unchanged (an out-of-memory error is recorded, not caught)


class MetricsTracker(Observer):
    """`profiler`'s per-iteration metrics (see the module docstring). `cfg`: the whole ProfilerConfig
    (its `metrics` section and `integrated.profile_save_path`)."""

    def __init__(self, profiler: ObservedProfiler, cfg: Any, rank: int | None = None, world_size: int | None = None):
        self.cfg = cfg.metrics
        self.role = profiler.role
        self.rank = resolve_rank(rank, world_size)[0]
        out_dir = self.cfg.output_dir or os.path.join(cfg.integrated.profile_save_path, formats.METRICS_DIR)
        self.output_dir = Path(out_dir)
        self.path = self.output_dir / formats.metrics_file_name(self.role, self.rank)
        self.last: dict[str, Any] = {}
        self._stage_s: dict[str, float] = {}
        self._truncate = True     # the first row of a run starts the file; a resumed run appends
        self._peak: float | None = self.cfg.peak_tflops
        self._tb: Any = None      # the SummaryWriter, once made; False: unavailable
        self._scope = new_scope()
        self.memory = MemoryTracking(self.role, self.rank, self.cfg, self.output_dir, resolve_run_id(cfg)[0], self._scope)

    # ------------------------------------------------------------------ the observer protocol

    def started(self, profiler: ObservedProfiler, iteration: int) -> None:
        self._stage_s = {}
        if iteration > 1:
            self._truncate = False
        self.memory.started(iteration)

    def stage(self, profiler: ObservedProfiler, name: str) -> _StageTimer:
        return _StageTimer(self, name, profiler.iteration)

    def step(self, profiler: ObservedProfiler, iteration: int) -> None:
        self._finish(profiler, iteration - 1, dict(profiler.step_counts))

    def stopped(self, profiler: ObservedProfiler, iteration: int | None) -> None:
        # as the timeline: the iteration the last step() began counts only if a stage ran in it
        if iteration is not None and self._stage_s:
            self._finish(profiler, iteration, {})
        self.memory.stopped()
        if self._tb:
            try:
                self._tb.close()
            except Exception:
                pass
            self._tb = None

    # ------------------------------------------------------------------ rows

    def parameters(self, profiler: ObservedProfiler) -> int | None:
        """N: `metrics.parameters` when set, else the profiler's model (set_model)."""
        if self.cfg.parameters is not None:
            return self.cfg.parameters
        size = getattr(profiler, "model_size", None)
        return size.parameters if size is not None else None

    def peak(self) -> float | None:
        """TFLOPS of one device: `metrics.peak_tflops`, else the table's for this device (peaks.py)."""
        if self._peak is None:
            self._peak = peak_tflops(device_name())
        return self._peak

    def _finish(self, profiler: ObservedProfiler, iteration: int, counts: dict[str, int]) -> None:
        began, ended = profiler.iteration_window
        stage_s, self._stage_s = self._stage_s, {}
        memory = self.memory.end_iteration()
        if began is None or ended is None or iteration < 1:
            return
        parameters = self.parameters(profiler)
        peak = self.peak() if parameters and "tokens" in counts else None
        if "max_memory_allocated_gb" not in memory:   # a device the meter cannot read: the process's peaks
            memory = {**device_memory_gb(), **memory}
        allocated = memory.pop("max_memory_allocated_gb", None)
        row = iteration_row(iteration, ended - began, stage_s, counts, parameters, peak,
                            allocated if allocated is not None else max_memory_allocated_gb(), memory)
        self.last = row
        self._write(row)
        if self.cfg.tensorboard:
            self._scalars(row)

    def _write(self, row: dict[str, Any]) -> None:
        try:
            self.output_dir.mkdir(parents=True, exist_ok=True)
            # never a plain open(): a FIFO put at the path would hang step() forever, a link's target would be emptied
            with open_append(self.path, truncate=self._truncate) as fh:
                fh.write((json.dumps(row, separators=(",", ":")) + "\n").encode("utf-8"))
            self._truncate = False
        except Exception as exc:   # a full disk, a read-only directory, a FIFO there: training goes on
            warn_once((self._scope, "metrics-write"), "could not write the iteration metrics to %s (%s rank %d): %s: %s; "
                      "training goes on (prof.metrics() still has them)", self.path, self.role, self.rank,
                      type(exc).__name__, exc)

    def _scalars(self, row: dict[str, Any]) -> None:
        if self._tb is None:
            try:
                from torch.utils.tensorboard import SummaryWriter

                self._tb = SummaryWriter(log_dir=str(self.output_dir / "tensorboard" / f"{self.role}_rank{self.rank}"))
            except Exception as exc:
                self._tb = False
                warn_once(("metrics-tensorboard", type(exc).__name__), "metrics.tensorboard is true but TensorBoard is "
                          "unusable here (%s: %s): no scalars are written; the JSON lines still are", type(exc).__name__, exc)
        if not self._tb:
            return
        try:
            step = row["iteration"]
            for key, value in row.items():
                if key != "iteration":
                    self._tb.add_scalar(key, value, step)
            self._tb.flush()
        except Exception as exc:
            warn_once((self._scope, "metrics-tb-write"), "TensorBoard scalars for %s rank %d failed: %s: %s; training goes on",
                      self.role, self.rank, type(exc).__name__, exc)
