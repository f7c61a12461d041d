"""Process-wide runtime state shared by the profiler (writer) and the markers (reader).

Markers read these attributes on every call, so they are plain module attributes of one
object: turning profiling off costs one attribute check. Only `session.py`, `profiler.py`, `tracing/` and
`mstx.enable_markers` write here.
"""
from __future__ import annotations


class _State:
    __slots__ = (
        "mstx_enabled",
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
        # True when `integrated.mstx` is on (or the tracer is on) in this process.
        self.mstx_enabled: bool = False
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


STATE = _State()
