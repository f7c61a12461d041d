"""The small interface every capture backend implements.

The profiler core (profiler.py) owns gating, naming, metadata and error handling; a backend only
knows how to run one capture: start it at the beginning of iteration `spec.begin`, advance it at
the end of each iteration, stop it and say which files it wrote. Every method may raise: the core
catches, records and abandons the capture.

A backend class also tells the registry (registry.py) what it is: its name in
`integrated.backend`, the capture directory suffix it writes (formats.CAPTURE_FORMATS), how much
`auto` prefers it, whether it can run here, which markers the mstx helpers should emit
while it runs (mstx.py), and which backend-specific options it honours (honour.py).
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from mindspeed_profiler.core.capture_options import CaptureSettings
from mindspeed_profiler.capture.schedule import Window

@dataclass(frozen=True, kw_only=True)
class CaptureSpec(Window):
    """One capture's window (first / last recorded iteration, warmup, begin, active) plus naming."""

    save_dir: str  # <profile_save_path>/<stage or "all">
    worker_name: str  # <role>_rank<R>_step<A>-<B>[_c<K>]_<host>
    trace_basename: str  # <role>_rank<R>
    cfg: CaptureSettings


class CaptureHandle(ABC):
    """One capture. Call order: start(), step() at the end of each iteration, stop(), export()."""

    directory: Path | None = None  # the capture directory, once it exists
    notes: list[str] = []  # what the capture could not do (a note in its metadata); set per instance
    # seconds per export phase (stop, write, compress, snapshot, ...): the metadata's export_phases
    phases: dict[str, float] = {}
    # what export() left to write later, in order (backends/trace_files.Deferred): the background
    # writer runs them (runtime/export_writer.py); set per instance
    deferred: list[tuple[str, Any]] = []
    # export_after_run (the torch backend): the key of the held session this capture records in, and
    # that session (backends/held_session.py), which the runtime flushes and sizes; None otherwise
    held_key: tuple | None = None
    held: Any = None
    # whether it records with torch.profiler, one session per process: a held session that it does
    # not join (held_key None, or another key) is flushed before it starts
    torch_session: ClassVar[bool] = False

    @abstractmethod
    def start(self) -> None: ...

    @abstractmethod
    def step(self) -> None: ...

    @abstractmethod
    def stop(self) -> None: ...

    @abstractmethod
    def export(self) -> list[Path]:
        """Write what must be written now; return the trace files written (may be empty). What
        can wait goes into `deferred`: each step takes the file list and returns it updated."""

    def abandon(self) -> None:
        """Best-effort cleanup after a failure; must not raise."""
        try:
            self.stop()
        except Exception:
            pass


class WindowedCapture(CaptureHandle):
    """A capture driven by hand over its window: warm-up from `spec.begin`, recording from
    `spec.first` to `spec.last`, one step range per recorded iteration, named by the 1-based
    training iteration. The stepping is here once; a subclass says what beginning to record,
    opening and closing a step range mean for its tool (`_begin_recording`, `_open_step`,
    `_close_step`) and calls `_start_window()` at the end of its start()."""

    def __init__(self, spec: CaptureSpec):
        self.spec = spec
        self._iteration = spec.begin
        self._recording = False

    @abstractmethod
    def _begin_recording(self) -> None:
        """The window's first iteration begins: start recording (the step range opens after)."""

    @abstractmethod
    def _open_step(self, iteration: int) -> None: ...

    @abstractmethod
    def _close_step(self) -> None: ...

    def _start_window(self) -> None:
        if self.spec.warmup == 0:
            self._record()

    def _record(self) -> None:
        self._begin_recording()
        self._recording = True
        self._open_step(self._iteration)

    def step(self) -> None:
        if self._recording:
            self._close_step()
        self._iteration += 1
        if self._iteration == self.spec.first and not self._recording:
            self._record()
        elif self._recording and self._iteration <= self.spec.last:
            self._open_step(self._iteration)


class Backend(ABC):
    """A capture backend. Subclasses set the class attributes and register with
    `@register_backend` (backends/registry.py)."""

    name: ClassVar[str]  # the value of integrated.backend
    suffix: ClassVar[str]  # capture directory suffix, a key of formats.CAPTURE_FORMATS
    priority: ClassVar[int] = 0  # `auto` takes the usable backend with the highest priority
    # device -> marker kinds (backends/marker_kinds/) the mstx helpers emit on that device while mstx is on
    device_markers: ClassVar[dict[str, tuple[str, ...]]] = {}
    # marker kinds that show up inside this backend's own capture while it records
    capture_markers: ClassVar[tuple[str, ...]] = ()
    # the marker kind that draws an RL stage as a range inside the capture
    stage_marker: ClassVar[str] = "record_function"
    # whether `profile_level: level_none` records annotations only in this backend's own session;
    # if not, the profiler records them itself (backends/markers.py) instead of opening the session
    annotation_only_mode: ClassVar[bool] = False
    # the backend-specific options (options.BACKEND_OPTIONS fields) it honours; others set are noted
    honours: ClassVar[frozenset[str]] = frozenset()
    # what records, as the notes name it ("torch.profiler"); default: "the <name> backend"
    tool: ClassVar[str] = ""

    device: str  # the device this instance captures: "npu" | "cuda" | "cpu" | ...

    @classmethod
    def unusable_reason(cls) -> str | None:
        """Why this backend cannot run in this process (None: it can). Must not raise."""
        return None

    @classmethod
    def detect_device(cls) -> str | None:
        """The device this backend would capture here, or None when it cannot run. Must not raise."""
        return None

    @abstractmethod
    def open(self, spec: CaptureSpec) -> CaptureHandle: ...

    def warm(self) -> None:
        """Load now, at the profiler's start, what this backend's first capture would otherwise load
        inside the step that opens it. Must not raise."""

    def options(self, cfg: CaptureSettings) -> dict[str, Any]:
        """The backend options a config turns into (for the metadata)."""
        return {}

    @property
    def markers(self) -> tuple[str, ...]:
        return self.device_markers.get(self.device, ())
