"""Memory you can act on, beside the metrics tracker (docs/memory.md): the per-stage meter
(stage_memory.py), the out-of-memory record (oom.py), the host watermark (host_watermark.py), the
allocator's history kept for an out-of-memory snapshot, and their files under
`<metrics output_dir>/memory/` (core/formats.py's MEMORY_* names).

- Every stage call: the meter's peaks; at each step() the iteration's calls are appended to
  `<role>_rank<R>.stages.jsonl` (one line each) and their per-stage maxima go into the tracker's row.
- A device (or host) out-of-memory error escaping a stage: the record is written at once, the
  allocator's snapshot beside it when its history is being kept (`metrics.oom_snapshot`, or a
  `profile_with_memory` window), and the exception goes on unchanged (the stage context returns
  False; nothing is caught). Once per exception, however many stages it leaves.
- The host watermark crossed: the same record, kind host_watermark, from the background thread.

Nothing here raises into training: a file that cannot be written is a warning.
"""
from __future__ import annotations

import itertools
import json
import os
import socket
import weakref
from pathlib import Path
from typing import Any

from mindspeed_profiler.backends.memory_snapshot import HISTORY
from mindspeed_profiler.core import formats
from mindspeed_profiler.core.fileio import open_append
from mindspeed_profiler.core.state import STATE
from mindspeed_profiler.core.warn import log, warn_once
from mindspeed_profiler.metrics import oom
from mindspeed_profiler.metrics.host_watermark import HostWatermark
from mindspeed_profiler.metrics.stage_memory import StageCall, StageMemory
from mindspeed_profiler.runtime import export_writer
from mindspeed_profiler.runtime.host_memory import host_limit

GIB = 2**30
STAGE_KEYS = (   # tracker row key (after perf/) -> the per-stage aggregate's index (stage_memory.StageMemory.per_stage)
    ("max_memory_allocated_gb/", 1), ("max_memory_reserved_gb/", 2), ("max_host_memory_gb/", 3),
    ("offload_gb/", 4), ("onload_gb/", 5))
STAGES_SCHEMA = 1
LIVE: "weakref.WeakSet[MemoryTracking]" = weakref.WeakSet()   # every tracker's, for runtime/own_memory.py


class MemoryTracking:
    """One tracker's memory (see the module docstring). `cfg`: the `metrics` section."""

    def __init__(self, role: str, rank: int, cfg: Any, output_dir: Path, run_id: str | None, scope: int):
        self.role, self.rank, self.cfg, self.run_id, self._scope = role, rank, cfg, run_id, scope
        self.dir = Path(output_dir) / formats.MEMORY_DIR
        self.stages_path = self.dir / formats.memory_stages_name(role, rank)
        self.meter = StageMemory()
        self.records: list[Path] = []       # the records written, in order
        self._numbers = itertools.count(1)
        self._truncate = True               # the run's first lines start the file
        self._header_written = False
        self._device_said = False
        self._history: str | None = None    # the device kind whose history we asked to keep
        self._last_oom: int | None = None   # id() of the exception last recorded (it leaves nested stages)
        self._tick_key = ("host-watermark", id(self))
        self._fh: Any = None                # the stage-call file, open from the first write to stop()
        self._quoted: dict[str, str] = {}   # stage name -> its JSON text
        self.watermark: HostWatermark | None = None
        if cfg.host_memory_watermark is not None:
            self.watermark = HostWatermark(cfg.host_memory_watermark, self._crossed)
        LIVE.add(self)

    # ------------------------------------------------------------------ the run

    def started(self, iteration: int) -> None:
        if iteration > 1:
            self._truncate = False
        self._device()
        if self.watermark is not None and self.watermark.line is not None:
            export_writer.WRITER.every(self._tick_key, self.watermark.check)

    def _device(self) -> None:
        """Look for the device (until found); once found, keep its history when oom_snapshot asks."""
        self.meter.probe()
        dev = self.meter.device
        if dev is None or self._history is not None or not self.cfg.oom_snapshot:
            return
        try:
            HISTORY.keep(dev.kind, self.cfg.oom_snapshot_entries, self.cfg.oom_snapshot_stacks, dev.mem)
            self._history = dev.kind
        except Exception as exc:
            self._history = ""   # asked once
            warn_once((self._scope, "oom-history"), "metrics.oom_snapshot: the %s allocator's history could not be "
                      "kept (%s: %s); an out-of-memory error still leaves its record, without a snapshot",
                      dev.kind, type(exc).__name__, exc)

    def stopped(self) -> None:
        export_writer.WRITER.cancel(self._tick_key)
        self._close_file()
        if self._history:
            try:
                HISTORY.release(self._history, self.meter.device.mem if self.meter.device is not None else None)
            except Exception:
                pass
            self._history = None

    # ------------------------------------------------------------------ a stage call

    def enter(self, stage: str, iteration: int | None) -> StageCall:
        self._last_oom = None   # a new stage call: the last exception was handled
        return self.meter.enter(stage, iteration)

    def exit(self, call: StageCall, exc: BaseException | None) -> None:
        if exc is None:
            self.meter.exit(call)
            return
        self.meter.exit(call, type(exc).__name__)
        kind = oom.oom_kind(exc)
        if kind is not None and id(exc) != self._last_oom:
            self._last_oom = id(exc)
            self.record(kind, call.stage, call.iteration, exc)

    # ------------------------------------------------------------------ the iteration

    def end_iteration(self) -> dict[str, float]:
        """The iteration's memory keys for the tracker's row (GiB; without their `perf/`), its stage
        lines appended."""
        was_found = self.meter.device is not None
        calls, per_stage, dropped = self.meter.end_iteration()
        keys: dict[str, float] = {}
        dev_alloc, dev_res, host = self.meter.iteration_peaks
        if dev_alloc is not None:
            keys["max_memory_allocated_gb"] = dev_alloc / GIB
        if dev_res is not None:
            keys["max_memory_reserved_gb"] = dev_res / GIB
        if host is not None:
            keys["max_host_memory_gb"] = host / GIB
        if self.meter.device_capacity:
            keys["memory_capacity_gb"] = self.meter.device_capacity / GIB
        for prefix, i in STAGE_KEYS:
            for stage, agg in per_stage.items():
                if agg[i] is not None and (i < 4 or agg[i]):   # offload / onload only where some moved
                    keys[prefix + stage] = agg[i] / GIB
        self._write_lines(calls, dropped)
        if not was_found:
            self._device()
        return keys

    def _write_lines(self, calls: list[StageCall], dropped: int) -> None:
        lines = []
        if not self._header_written:
            limit, source, _ = host_limit()
            lines.append({"type": "worker", "schema": STAGES_SCHEMA, formats.RUN_ID_KEY: self.run_id, "role": self.role,
                          "rank": self.rank, "pid": os.getpid(), "host": socket.gethostname(),
                          "host_peak_scope": "stage" if self.meter.host.resettable else "process",
                          "host_limit_bytes": limit, "host_limit_source": source})
        dev = self.meter.device
        if dev is not None and not self._device_said:
            lines.append({"type": "device", "kind": dev.kind, "capacity_bytes": self.meter.device_capacity})
        text = "".join(c.line_text(self._quoted) for c in calls)
        if dropped:
            lines.append({"type": "dropped", "iteration": calls[-1].iteration if calls else None, "calls": dropped})
        for note in self.meter.notes:
            lines.append({"type": "note", "note": note})
        self.meter.notes.clear()
        if not lines and not text:
            return
        try:
            data = ("".join(json.dumps(x, separators=(",", ":")) + "\n" for x in lines) + text).encode("utf-8")
            if self._fh is None:   # opened once, kept: an open per iteration was most of the step's cost
                self.dir.mkdir(parents=True, exist_ok=True)
                self._fh = open_append(self.stages_path, truncate=self._truncate)
                self._truncate = False
            self._fh.write(data)
            self._fh.flush()
            self._header_written = True
            self._device_said = self._device_said or dev is not None
        except Exception as exc:
            self._close_file()
            warn_once((self._scope, "memory-write"), "could not write the per-stage memory to %s (%s rank %d): %s: %s; "
                      "training goes on", self.stages_path, self.role, self.rank, type(exc).__name__, exc)

    def _close_file(self) -> None:
        fh, self._fh = self._fh, None
        if fh is not None:
            try:
                fh.close()
            except Exception:
                pass

    # ------------------------------------------------------------------ records

    def _crossed(self, reading: dict[str, Any]) -> None:
        """The background thread: the host watermark was crossed."""
        self.record(oom.HOST_WATERMARK, STATE.stage, STATE.iteration, None, watermark=reading)

    def record(self, kind: str, stage: str | None, iteration: int | None, exc: BaseException | None,
               watermark: dict[str, Any] | None = None) -> Path | None:
        """Write one record (and the allocator's snapshot, for a device out-of-memory error while
        its history is kept); its path, or None when it could not be written (a warning says why)."""
        name = formats.memory_record_name(self.role, self.rank, kind, os.getpid(), next(self._numbers))
        path = self.dir / name
        dev = self.meter.device
        history = HISTORY.recording(dev.kind) if dev is not None else None
        try:
            device, notes = oom.device_section(dev, history)
            rec = oom.memory_record(kind, role=self.role, rank=self.rank, run_id=self.run_id, stage=stage,
                                    iteration=iteration, exc=exc, device=device, host=oom.host_section(),
                                    stage_peaks=dict(self.meter.run_peaks), recent=list(self.meter.recent),
                                    notes=notes, watermark=watermark)
            if history is not None and kind == oom.DEVICE_OOM:
                rec["snapshot"], note = oom.dump_snapshot(dev, self.dir / formats.memory_record_snapshot_name(name))
                if note:
                    rec["notes"].append(note)
                    warn_once((self._scope, "oom-snapshot"), "%s rank %d: %s", self.role, self.rank, note)
        except Exception as exc2:   # the record itself could not be made: say so, never a second failure
            warn_once((self._scope, "oom-record", kind), "%s rank %d: the %s record could not be made: %s: %s",
                      self.role, self.rank, kind, type(exc2).__name__, exc2)
            return None
        failed = oom.write_record(path, rec)
        if failed:
            warn_once((self._scope, "oom-record-write", kind), "%s rank %d: %s (training goes on)", self.role, self.rank, failed)
            return None
        self.records.append(path)
        what = {oom.DEVICE_OOM: "a device out-of-memory error", oom.HOST_OOM: "a host out-of-memory error",
                oom.HOST_WATERMARK: "host memory past the watermark"}[kind]
        try:
            log.warning("%s rank %d: %s in stage %s, iteration %s: its record is %s%s", self.role, self.rank, what,
                        stage, iteration, path, " (with the allocator's snapshot)" if rec.get("snapshot") else "")
        except Exception:
            pass
        return path

    def close(self) -> None:
        self.stopped()
        self.meter.close()
