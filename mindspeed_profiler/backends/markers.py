"""The `markers` backend: the lightweight mode (`profile_level: level_none`) where the vendor has
no annotation-only mode. torch.profiler cannot record annotations without recording every op, so
instead of opening a vendor session, our own recorder keeps, for the window only, the mstx ranges,
the RL stage ranges and one `ProfilerStep#N` range per iteration, and writes them at the window's
end as a Chrome trace (Kineto's format, `cat: user_annotation`) in the usual capture directory:
Perfetto opens it, and our analysis reads it as a capture of its own. On CUDA the mstx ranges are
NVTX ranges as well (nsys sees them). On Ascend, torch_npu's real Level_none + mstx is used instead
(the npu backend has an annotation-only mode).

Cost per range while recording: two clock reads and one list append (docs/perf_profiler.md).
"""
from __future__ import annotations

import gzip
import os
import threading
import time
from pathlib import Path
from typing import Any

import orjson

from mindspeed_profiler.backends import layout
from mindspeed_profiler.backends.base import Backend, CaptureHandle, CaptureSpec, WindowedCapture
from mindspeed_profiler.backends.marker_kinds import MarkerKind, register_marker_kind
from mindspeed_profiler.backends.registry import register_backend
from mindspeed_profiler.core.capture_options import CaptureSettings

_clock = time.perf_counter_ns
_get_ident = threading.get_ident
# The buffer of the capture recording in this process (one capture at a time, as for the vendors'):
# (name, start_ns, dur_ns, thread) tuples, or None outside a window.
_buffer: list | None = None


class BufferMarkers:
    """The marker kind `buffer` (backends/marker_kinds): ranges and marks into the recording capture."""

    def start(self, name: str, domain: str, stream: Any) -> Any:
        return (name, _clock()) if _buffer is not None else None

    def end(self, token: Any, domain: str) -> None:
        buf = _buffer
        if buf is not None:
            name, t0 = token
            buf.append((name, t0, _clock() - t0, _get_ident()))

    def mark(self, message: str, domain: str, stream: Any) -> None:
        buf = _buffer
        if buf is not None:
            buf.append((message, _clock(), 0, _get_ident()))


register_marker_kind(MarkerKind("buffer", BufferMarkers))


class MarkersCapture(WindowedCapture):
    """Warm-up is nothing to do (no vendor session); the window [first, last] records (the
    stepping: base.WindowedCapture)."""

    def __init__(self, spec: CaptureSpec):
        super().__init__(spec)
        self.directory = None
        self.notes: list[str] = []
        self._events: list = []
        self._step_t0: int | None = None
        # wall-clock anchor: ts in the file are absolute microseconds, as Kineto writes them
        self._anchor = (time.time_ns(), _clock())

    def start(self) -> None:
        self.directory = layout.make_capture_dir(self.spec.save_dir, self.spec.worker_name, MarkersBackend.suffix)
        self._start_window()

    def _begin_recording(self) -> None:
        global _buffer
        _buffer = self._events

    def _open_step(self, iteration: int) -> None:
        self._step_t0 = _clock()

    def _close_step(self) -> None:
        if self._step_t0 is not None:
            self._events.append((f"ProfilerStep#{self._iteration}", self._step_t0, _clock() - self._step_t0, _get_ident()))
            self._step_t0 = None

    def stop(self) -> None:
        global _buffer
        if self._recording:
            self._close_step()
            self._recording = False
        if _buffer is self._events:
            _buffer = None

    def export(self) -> list[Path]:
        if not self._events:
            return []
        wall0, mono0 = self._anchor
        pid = os.getpid()
        tids: dict[int, int] = {}
        events = [{"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": f"{self.spec.trace_basename}"}}]
        for name, t0, dur, ident in self._events:
            tid = tids.setdefault(ident, threading.get_native_id() if ident == _get_ident() else len(tids) + 1)
            events.append({"ph": "X", "cat": "user_annotation", "name": name, "pid": pid, "tid": tid,
                           "ts": (wall0 + (t0 - mono0)) / 1000.0, "dur": dur / 1000.0})
        path = self.directory / layout.trace_file_name(self.spec.trace_basename)
        try:
            with gzip.open(path, "wb", compresslevel=3) as fh:
                fh.write(orjson.dumps({"traceEvents": events, "displayTimeUnit": "ms",
                                       "otherData": {"generator": "mindspeed-profiler markers backend (lightweight)"}}))
        except BaseException:
            path.unlink(missing_ok=True)
            raise
        return [path]


@register_backend
class MarkersBackend(Backend):
    """Lightweight captures without a vendor session: chosen by the profiler for level_none when
    the selected backend has no annotation-only mode (torch); never picked by `auto`."""

    name = "markers"
    suffix = "pt"            # a Chrome / Kineto-format trace
    priority = -100
    annotation_only_mode = True
    device_markers = {"cuda": ("nvtx",), "cpu": ()}
    capture_markers = ("buffer",)
    stage_marker = "buffer"
    tool = "mindspeed-profiler's marker recorder"  # honours no backend-specific option

    def __init__(self, device: str = "cpu"):
        self.device = device

    def options(self, cfg: CaptureSettings) -> dict[str, Any]:
        return {"recorder": "markers", "annotations_only": True, "activities": [], "notes": [
            "level_none on a backend without an annotation-only mode: no vendor session; the mstx ranges, stage "
            "ranges and ProfilerStep ranges of the window are recorded by mindspeed-profiler itself"]}

    def open(self, spec: CaptureSpec) -> CaptureHandle:
        return MarkersCapture(spec)
