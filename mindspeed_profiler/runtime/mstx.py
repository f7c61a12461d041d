"""Markers: `mstx_timer_decorator`, `mstx_range`, `mstx_mark` (MindSpeed-RL's lightweight mode, fixed).

Each marker dispatches to the marker kinds the running backend names (the registry in
backends/marker_kinds/):
  - NPU:  torch_npu.npu.mstx range_start/range_end/mark (host-side; device-side when given a stream)
  - CUDA: NVTX (torch.cuda.nvtx range_start/range_end/mark), plus torch.profiler.record_function while a capture runs
  - CPU:  torch.profiler.record_function while a torch capture runs
  - plus a timeline span (cat "mstx") when the tracer is on, and optional per-name timing metrics.
Device markers are emitted only when `STATE.mstx_enabled` (set by the IntegratedProfiler when
`integrated.mstx` is on for this rank, or by `enable_markers()` for use under nsys / msprof);
with everything off a marked call costs two flag reads (tracing/wrap.py). Markers never raise into
user code; the range is closed however the marked code ends, and its exception propagates unchanged.
"""
from __future__ import annotations

import functools
import time
from typing import Any, Callable, Iterable, Optional, Union

from mindspeed_profiler.core.state import STATE, SWITCH
from mindspeed_profiler.backends import marker_kinds as _kinds
from mindspeed_profiler.backends.marker_kinds import DEFAULT_DOMAIN
from mindspeed_profiler.tracing.marker_metrics import METRICS
from mindspeed_profiler.core.warn import warn_once
from mindspeed_profiler.tracing.wrap import wrap_callable
from mindspeed_profiler.tracing.api import new_span, trace_instant

DEVICES = ("npu", "cuda", "cpu")
_perf_counter = time.perf_counter


# ------------------------------------------------------------------------------ timing metrics


def enable_marker_metrics(enabled: bool = True) -> None:
    """Also time every marked range (even with profiling off): see `pop_marker_metrics`."""
    METRICS.on = bool(enabled)


def marker_metrics(reset: bool = False) -> dict[str, dict[str, float]]:
    """{name: {"count", "total_s", "max_s"}} since the last reset."""
    return METRICS.snapshot(reset)


def pop_marker_metrics() -> dict[str, dict[str, float]]:
    """The metrics of this iteration, then reset (call once per training step, like verl's timing_raw)."""
    return marker_metrics(reset=True)


# ------------------------------------------------------------------------------ marker kinds


def domain_selected(domain: str, include: Iterable[str], exclude: Iterable[str]) -> bool:
    """torch_npu's rule: a non-empty include list wins; else everything not excluded."""
    include = tuple(include)
    if include:
        return domain in include
    return domain not in tuple(exclude)


# Marker kind -> its implementation: the registry in backends/marker_kinds/ (a new kind is one module
# there plus one registration line). Capture backends name the kinds they want
# (Backend.device_markers / capture_markers / stage_marker).
MARKERS = _kinds.MARKERS
register_marker_kind = _kinds.register_marker_kind
_loaded: dict[str, Optional[Any]] = {}  # kind -> implementation, or None (unavailable), resolved once


def load_marker(kind: str) -> Optional[Any]:
    """The implementation of marker kind `kind` (loaded once), or None when unavailable (warned once)."""
    if kind in _loaded:
        return _loaded[kind]
    impl = None
    try:
        entry = _kinds.marker_kind(kind)
        if entry is None:
            raise LookupError(f"no marker kind {kind!r} is registered ({', '.join(_kinds.marker_kind_names())})")
        impl = entry.load()
    except Exception as exc:
        warn_once(f"mstx-backend-{kind}", f"mindspeed-profiler markers: {kind} markers unavailable ({exc!r}); those markers are skipped")
    _loaded[kind] = impl
    return impl


def _device_backends() -> tuple:
    """The marker implementations for the current STATE (empty when mstx is off): the device's
    markers, plus the running capture's own while one records."""
    if not STATE.mstx_enabled:
        return ()
    kinds, in_capture = STATE.markers, STATE.capture_markers
    if kinds is None:
        kinds, in_capture = _markers_of(STATE.device or _detected_device())
    if STATE.capture_active:
        kinds = tuple(dict.fromkeys(kinds + in_capture))
    return tuple(impl for impl in map(load_marker, kinds) if impl is not None)


_device_kinds: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {}
_detected: list = []


def _markers_of(device: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    if device not in _device_kinds:
        from mindspeed_profiler.backends.registry import device_markers

        _device_kinds[device] = device_markers(device)
    return _device_kinds[device]


def _detected_device() -> str:
    """The device of the preferred usable capture backend (npu, cuda or cpu), cached."""
    if not _detected:
        from mindspeed_profiler.backends.registry import detect_device

        _detected.append(detect_device())
    return _detected[0]


# ------------------------------------------------------------------------------ the range


class _Range:
    """One marked range: device markers + tracer span + timing, each closed on exit, never raising."""

    __slots__ = ("name", "domain", "stream", "started", "span", "t0")

    def __init__(self, name: str, domain: str, stream: Any):
        self.name = name
        self.domain = domain
        self.stream = stream

    def __enter__(self) -> "_Range":
        self.started = []
        self.span = None
        self.t0 = None
        include, exclude = STATE.mstx_domain_include, STATE.mstx_domain_exclude
        if (include or exclude) and not domain_selected(self.domain, include, exclude):
            return self
        for backend in _device_backends() if STATE.mstx_enabled else ():
            try:
                token = backend.start(self.name, self.domain, self.stream)
            except Exception as exc:
                warn_once(f"mstx-start-{type(backend).__name__}", f"mindspeed-profiler markers: range start failed ({exc!r}); continuing")
                continue
            if token is not None:
                self.started.append((backend, token))
        rec = STATE.tracer
        if rec is not None:
            self.span = new_span(rec, self.name, "mstx", _span_args(self.domain)).__enter__()
        if METRICS.on:
            self.t0 = _perf_counter()
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        if self.t0 is not None:
            METRICS.add(self.name, _perf_counter() - self.t0)
        if self.span is not None:
            self.span.__exit__(exc_type, exc, tb)
        for backend, token in reversed(self.started):
            try:
                backend.end(token, self.domain)
            except Exception as exc_end:
                warn_once(f"mstx-end-{type(backend).__name__}", f"mindspeed-profiler markers: range end failed ({exc_end!r}); continuing")
        self.started = []
        return False  # never swallow the marked code's exception


def _span_args(domain: str) -> Optional[dict]:
    return None if domain == DEFAULT_DOMAIN else {"domain": domain}


def _marker(name: str, domain: str, stream: Any, span_args: Optional[dict]) -> Any:
    """What marks one decorated call: a _Range, or just a tracer Span when the tracer is the only
    output on (what _Range would do then, minus its own layer), or None when the domain is
    filtered out. `span_args`: _span_args(domain), made once per decorated function (spans only
    read it)."""
    if STATE.mstx_enabled or METRICS.on:
        return _Range(name, domain, stream)
    rec = STATE.tracer
    if rec is None:
        return None
    include, exclude = STATE.mstx_domain_include, STATE.mstx_domain_exclude
    if (include or exclude) and not domain_selected(domain, include, exclude):
        return None
    return new_span(rec, name, "mstx", span_args)


def mstx_range(name: str, domain: str = DEFAULT_DOMAIN, stream: Any = None) -> Any:
    """Context manager marking a block (a shared no-op object when markers are off)."""
    if not SWITCH.on:
        return _OFF
    return _Range(name, domain, stream)  # reusable, unlike a Span: `with r:` may run twice


class _Off:
    __slots__ = ()

    def __enter__(self) -> "_Off":
        return self

    def __exit__(self, *exc: Any) -> bool:
        return False


_OFF = _Off()


def mstx_timer_decorator(
    func: Union[Callable, str, None] = None, *, name: Optional[str] = None, domain: str = DEFAULT_DOMAIN, stream: Any = None
) -> Any:
    """Mark each call of a sync or async function (or method).

    Bare `@mstx_timer_decorator`, or `@mstx_timer_decorator("name")`,
    or `@mstx_timer_decorator(name="x", domain="rollout")`. The range name defaults to the
    function's qualified name (MindSpeed-RL uses `__name__`; the qualname tells methods apart).
    """
    if isinstance(func, str):
        name, func = func, None

    def decorate(f: Callable) -> Callable:
        inner = f.__func__ if isinstance(f, (staticmethod, classmethod)) else f
        label = name or getattr(inner, "__qualname__", None) or getattr(inner, "__name__", repr(inner))

        return wrap_callable(f, functools.partial(_marker, label, domain, stream, _span_args(domain)))

    # func: the decorated function, or a staticmethod / classmethod object (not callable), or None
    return decorate(func) if func is not None else decorate


def mstx_mark(message: str, domain: str = DEFAULT_DOMAIN, stream: Any = None) -> None:
    """An instant marker (mstx mark / NVTX mark / zero-length record_function / tracer instant)."""
    if not (STATE.mstx_enabled or STATE.tracer is not None):
        return
    if not domain_selected(domain, STATE.mstx_domain_include, STATE.mstx_domain_exclude):
        return
    for backend in _device_backends():
        try:
            backend.mark(message, domain, stream)
        except Exception as exc:
            warn_once(f"mstx-mark-{type(backend).__name__}", f"mindspeed-profiler markers: mark failed ({exc!r}); continuing")
    if STATE.tracer is not None:
        trace_instant(message, "mstx", None if domain == DEFAULT_DOMAIN else {"domain": domain})


# ------------------------------------------------------------------------------ without our profiler


def enable_markers(
    enabled: bool = True,
    device: Optional[str] = None,
    domain_include: Iterable[str] = (),
    domain_exclude: Iterable[str] = (),
) -> None:
    """Turn device markers on (or off) without the IntegratedProfiler, e.g. under nsys or msprof.

    `device`: "npu", "cuda" or "cpu"; None keeps the current one or auto-detects at first use.
    (The IntegratedProfiler sets all of this itself from `integrated.mstx` and its domains.)
    """
    if device is not None and device not in DEVICES:
        raise ValueError(f"enable_markers: device={device!r}; allowed: {', '.join(DEVICES)} or None (auto-detect)")
    include, exclude = _domains("domain_include", domain_include), _domains("domain_exclude", domain_exclude)
    STATE.mstx_enabled = bool(enabled)
    if device is not None:
        STATE.device = device
        STATE.markers = None  # the device's own markers
    STATE.mstx_domain_include = include
    STATE.mstx_domain_exclude = exclude


def _domains(field: str, value: Iterable[str]) -> tuple[str, ...]:
    if isinstance(value, str):
        raise ValueError(f"enable_markers: {field}={value!r}; expected a list of domain names such as ['default', 'rollout']")
    items = tuple(value or ())
    bad = [v for v in items if not isinstance(v, str) or not v]
    if bad:
        raise ValueError(f"enable_markers: {field} has {bad!r}; domain names must be non-empty strings")
    return items


def reset_marker_backends() -> None:
    """Forget resolved marker implementations (after the device changes, and in tests)."""
    _loaded.clear()
    _device_kinds.clear()
    _detected.clear()
