"""Process-wide runtime state shared by the profiler (writer) and the markers (reader).

Markers read these attributes on every call, so they are plain module attributes of one
object: turning profiling off costs one attribute check. Only the runtime writes here:
runtime/session.py, runtime/profiler.py, runtime/captures.py, runtime/stage_scope.py (the current
stage), runtime/mstx.py (`enable_markers`) and tracing/ (api.py, marker_metrics.py). It sits in
core/ (layer 1, standard library only) because the markers of every layer read it.
"""
from __future__ import annotations

import os
import threading


class _Switch:
    """`on`: a marked call has something to do (device markers, the tracer or marker metrics): the
    one flag the marked-call wrappers read when everything is off, so the off path is one slot read
    (docs/perf_tracing.md). `recording`: the tracer or marker metrics are on
    (tracing/marker_metrics.refresh_switch keeps it). Both are kept up to date by their writers: setting
    STATE.mstx_enabled, refresh_switch()."""

    __slots__ = ("on", "recording", "lock")

    def __init__(self) -> None:
        self.on = False
        self.recording = False
        # its writers recompute `on` under this lock: two of them at once (markers turned on in one
        # thread, the tracer off in another) cannot leave it stale
        self.lock = threading.Lock()


SWITCH = _Switch()


def update_switch(recording: bool | None = None) -> None:
    """Recompute SWITCH.on (with `recording`, the tracer-or-metrics part, when it changed): the one
    place its rule lives, called by STATE.mstx_enabled's setter and tracing/marker_metrics.refresh_switch."""
    with SWITCH.lock:
        if recording is not None:
            SWITCH.recording = recording
        SWITCH.on = SWITCH.recording or bool(STATE._mstx_enabled)


if hasattr(os, "register_at_fork"):   # a child forked while another thread held the lock gets a free one
    os.register_at_fork(after_in_child=lambda: setattr(SWITCH, "lock", threading.Lock()))


class _State:
    __slots__ = (
        "_mstx_enabled",
        "device",
        "markers",
        "capture_markers",
        "capture_active",
        "mstx_domain_include",
        "mstx_domain_exclude",
        "tracer",
        "stage",
        "iteration",
    )

    def __init__(self) -> None:
        self._mstx_enabled: bool = False
        # "npu" | "cuda" | "cpu" | None: the device kind of the active IntegratedProfiler backend.
        self.device: str | None = None
        # The marker kinds (mstx.MARKERS) the running backends emit on their device; None = the
        # kinds of `device` (or of the detected device), as after enable_markers(device=...).
        self.markers: tuple[str, ...] | None = None
        # Marker kinds that show inside a running capture (torch: record_function), used while
        # capture_active.
        self.capture_markers: tuple[str, ...] = ()
        # True while a torch / torch_npu capture is recording in this process.
        self.capture_active: bool = False
        self.mstx_domain_include: tuple[str, ...] = ()
        self.mstx_domain_exclude: tuple[str, ...] = ()
        # The per-process tracer recorder when `tracer.enable` is on, else None.
        self.tracer = None
        # Current RL stage name and 1-based iteration, for span args (None when unknown).
        self.stage: str | None = None
        self.iteration: int | None = None

    @property
    def mstx_enabled(self) -> bool:
        """True when `integrated.mstx` is on (or enable_markers) in this process: device markers."""
        return self._mstx_enabled

    @mstx_enabled.setter
    def mstx_enabled(self, value: bool) -> None:  # a property so that no writer can leave SWITCH stale
        self._mstx_enabled = value
        update_switch()


STATE = _State()
