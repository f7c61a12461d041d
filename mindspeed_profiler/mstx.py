"""Markers: `mstx_timer_decorator`, `mstx_range`, `mstx_mark` (MindSpeed-RL's lightweight mode, fixed).

Each marker dispatches to what the running backend supports:
  - NPU:  torch_npu.npu.mstx range_start/range_end/mark (host-side; device-side when given a stream)
  - CUDA: NVTX (torch.cuda.nvtx range_start/range_end/mark), plus torch.profiler.record_function while a capture runs
  - CPU:  torch.profiler.record_function while a torch capture runs
  - plus a timeline span (cat "mstx") when the tracer is on, and optional per-name timing metrics.
Device markers are emitted only when `STATE.mstx_enabled` (set by the IntegratedProfiler when
`integrated.mstx` is on for this rank, or by `enable_markers()` for use under nsys / msprof);
with everything off a marked call costs a few attribute checks. Markers never raise into user
code; the range is closed however the marked code ends, and its exception propagates unchanged.
"""
from __future__ import annotations

import time
from typing import Any, Callable, Iterable, Optional, Union

from mindspeed_profiler._state import STATE
from mindspeed_profiler.tracing._metrics import METRICS
from mindspeed_profiler._warn import warn_once
from mindspeed_profiler.tracing._wrap import wrap_callable
from mindspeed_profiler.tracing.api import Span, trace_instant

DEVICES = ("npu", "cuda", "cpu")
DEFAULT_DOMAIN = "default"
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


# ------------------------------------------------------------------------------ backends


def domain_selected(domain: str, include: Iterable[str], exclude: Iterable[str]) -> bool:
    """torch_npu's rule: a non-empty include list wins; else everything not excluded."""
    include = tuple(include)
    if include:
        return domain in include
    return domain not in tuple(exclude)


class _NpuMarkers:
    """torch_npu.npu.mstx, called with the keywords the installed release takes (read from its
    signatures, else from the snapshot of that release: backends/npu.py `installed_api`).
    torch-npu 2.3.1 - 2.5.1 have range_start(message, stream), range_end(range_id), mark(message):
    no domain (and no stream on mark). There the domain is not passed (said once: domains are
    ignored on that version) and the marker is still emitted."""

    def __init__(self, mstx: Any, keywords: Optional[dict] = None, version: Optional[str] = None):
        self.mstx = mstx
        self.version = version or "(unknown version)"
        # function -> accepted keyword names (None or missing: any), decided once
        keywords = keywords or {}
        self._stream = {fn: keywords.get(fn) is None or "stream" in keywords[fn] for fn in ("range_start", "mark")}
        self._domain = {fn: keywords.get(fn) is None or "domain" in keywords[fn] for fn in ("range_start", "range_end", "mark")}

    def _kwargs(self, fn: str, domain: str, stream: Any) -> dict:
        kw = {}
        if stream is not None:
            if self._stream[fn]:
                kw["stream"] = stream
            else:
                warn_once(("mstx-no-stream", fn, self.version), "mindspeed-profiler markers: torch_npu %s: mstx.%s has no "
                          "stream keyword, so its markers are host-side only", self.version, fn)
        if self._domain[fn]:
            kw["domain"] = domain
        elif domain != DEFAULT_DOMAIN:
            warn_once(("mstx-no-domain", self.version), "mindspeed-profiler markers: torch_npu %s: mstx has no domain "
                      "keyword, so mstx domains are ignored on this version (markers of domain %r and any other are "
                      "recorded without one)", self.version, domain)
        return kw

    def start(self, name: str, domain: str, stream: Any) -> Any:
        rid = self.mstx.range_start(name, **self._kwargs("range_start", domain, stream))
        return rid if rid else None  # 0 = failure (None: a release that swallowed an error): nothing to end

    def end(self, token: Any, domain: str) -> None:
        self.mstx.range_end(token, **self._kwargs("range_end", domain, None))

    def mark(self, message: str, domain: str, stream: Any) -> None:
        self.mstx.mark(message, **self._kwargs("mark", domain, stream))


class _NvtxMarkers:
    """torch.cuda.nvtx range_start(msg) -> id / range_end(id) / mark(msg) (NVTX domains are not
    exposed by torch: the name carries it). Not range_push/range_pop: those close the innermost
    range of the thread, so async functions interleaving on one event loop would end each other's
    ranges; range_start ids close exactly the range they opened, on any thread."""

    def __init__(self, nvtx: Any):
        self.nvtx = nvtx

    def start(self, name: str, domain: str, stream: Any) -> Any:
        return self.nvtx.range_start(name if domain == DEFAULT_DOMAIN else f"{domain}:{name}")

    def end(self, token: Any, domain: str) -> None:
        self.nvtx.range_end(token)

    def mark(self, message: str, domain: str, stream: Any) -> None:
        self.nvtx.mark(message if domain == DEFAULT_DOMAIN else f"{domain}:{message}")


class _RecordFunctionMarkers:
    """torch.profiler.record_function: shows up as user_annotation in a running torch capture."""

    def __init__(self, record_function: Any):
        self.record_function = record_function

    def start(self, name: str, domain: str, stream: Any) -> Any:
        rf = self.record_function(name)
        rf.__enter__()
        return rf

    def end(self, token: Any, domain: str) -> None:
        token.__exit__(None, None, None)

    def mark(self, message: str, domain: str, stream: Any) -> None:
        with self.record_function(message):
            pass


def _load_mstx() -> Any:
    import torch_npu  # lazy: never at module top (it can break `import torch` without CANN)

    from mindspeed_profiler.backends.npu import MARK, RANGE_END, RANGE_START, installed_api

    api = installed_api(torch_npu)
    keywords = {short: api.keywords.get(full) for short, full in
                (("mark", MARK), ("range_start", RANGE_START), ("range_end", RANGE_END))}
    return _NpuMarkers(torch_npu.npu.mstx, keywords, api.version)


def _load_nvtx() -> Any:
    import torch

    if not torch.cuda.is_available():  # CPU builds raise on every nvtx call
        raise RuntimeError("torch.cuda is not available (CPU build or no GPU)")
    return _NvtxMarkers(torch.cuda.nvtx)


def _load_record_function() -> Any:
    from torch.profiler import record_function

    return _RecordFunctionMarkers(record_function)


# Marker kind -> loader of its implementation. Capture backends name the kinds they want
# (Backend.device_markers / capture_markers); a new kind is one class and one line here.
def _load_buffer() -> Any:
    from mindspeed_profiler.backends.markers import BufferMarkers

    return BufferMarkers()


MARKERS: dict[str, Callable[[], Any]] = {
    "mstx": _load_mstx,
    "nvtx": _load_nvtx,
    "record_function": _load_record_function,
    "buffer": _load_buffer,   # the lightweight capture's own recorder (backends/markers.py)
}
_loaded: dict[str, Optional[Any]] = {}  # kind -> implementation, or None (unavailable), resolved once


def _load_marker(kind: str) -> Optional[Any]:
    if kind in _loaded:
        return _loaded[kind]
    impl = None
    try:
        impl = MARKERS[kind]()
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
    return tuple(impl for impl in map(_load_marker, kinds) if impl is not None)


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
            args = None if self.domain == DEFAULT_DOMAIN else {"domain": self.domain}
            self.span = Span(rec, self.name, "mstx", args).__enter__()
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


def mstx_range(name: str, domain: str = DEFAULT_DOMAIN, stream: Any = None) -> Any:
    """Context manager marking a block (a shared no-op object when markers are off)."""
    if not (STATE.mstx_enabled or STATE.tracer is not None or METRICS.on):
        return _OFF
    return _Range(name, domain, stream)


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

        return wrap_callable(f, lambda: _Range(label, domain, stream))

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
