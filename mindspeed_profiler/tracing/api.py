"""The tracer's public API: init / shutdown, and the RLinf-compatible span helpers.

Every helper reads `STATE.tracer` first and returns at once when it is None, so calls can stay in
code paths that run with tracing off. Nothing here raises into user code at run time (config
errors in `init_tracer` do raise: they are caught before any worker starts).
"""
from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import socket
import threading
import time
from typing import Any, Callable, Optional, Union

from mindspeed_profiler._state import STATE
from mindspeed_profiler import formats
from mindspeed_profiler.manifest import resolve_run_id
from mindspeed_profiler._warn import warn_once
from mindspeed_profiler.tracing._wrap import wrap_callable
from mindspeed_profiler.tracing.recorder import Recorder
from mindspeed_profiler.tracing.sinks import CollectorSink, FileSink

_monotonic_ns = time.monotonic_ns
_get_ident = threading.get_ident
_get_running_loop = asyncio._get_running_loop
_NULL = contextlib.nullcontext()  # stateless and reentrant: one shared instance
_atexit_registered = False
_init_lock = threading.Lock()


class Span:
    """A span being recorded (returned by `trace_span` and `trace_begin`)."""

    __slots__ = ("rec", "name", "cat", "args", "start", "lane", "stage", "iteration", "done")

    def __init__(self, rec: Recorder, name: str, cat: str, args: Optional[dict]):
        self.rec = rec
        self.name = name
        self.cat = cat
        self.args = args
        self.done = False

    def __enter__(self) -> "Span":
        rec = self.rec
        # rec.lane() inlined: this and __exit__ are the tracer's whole hot path
        ident = _get_ident()
        if ident not in rec._threads:
            rec.register_thread(ident)
        self.lane = (ident, 0) if _get_running_loop() is None else (ident, rec.task_key())
        self.stage = STATE.stage
        self.iteration = STATE.iteration
        self.start = _monotonic_ns()
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        end = _monotonic_ns()
        if self.done:
            return False
        self.done = True
        args = self.args
        if exc_type is not None:
            args = dict(args or {})
            args["error"] = exc_type.__name__
        rec = self.rec
        buf = rec._buf  # rec.add() inlined
        if len(buf) >= rec.buffer_max:
            rec.dropped += 1
            return False
        buf.append(("X", self.name, self.cat, self.start, end - self.start, self.lane[0], self.lane[1], args, self.stage, self.iteration))
        if len(buf) >= rec.flush_every and not rec._kicked:
            rec.kick()
        return False


def trace_span(name: str, cat: str = "user", args: Optional[dict] = None) -> Any:
    """Context manager: one complete span around the block (a no-op when tracing is off)."""
    rec = STATE.tracer
    if rec is None:
        return _NULL
    return Span(rec, name, cat, args)


# Spans opened with trace_begin and not yet ended, per lane (for trace_end by name).
_open: dict[tuple[int, int], list] = {}


def trace_begin(name: str, cat: str = "user", args: Optional[dict] = None) -> Optional[Span]:
    """Open a span; close it with `trace_end(name)` or `trace_end(handle)`. Returns the handle."""
    rec = STATE.tracer
    if rec is None:
        return None
    span = Span(rec, name, cat, args).__enter__()
    _open.setdefault(span.lane, []).append(span)
    return span


def trace_end(name_or_span: Union[str, Span, None]) -> None:
    """Close the innermost open span with this name on this thread/task (else on any), or a handle."""
    if STATE.tracer is None and not _open:
        return
    try:
        span = _pop_open(name_or_span)
    except Exception:
        span = None
    if span is None:
        if name_or_span is not None:
            warn_once(f"trace-end-{name_or_span!s:.60}", f"mindspeed-profiler tracer: trace_end({name_or_span!r}) has no matching trace_begin; ignored")
        return
    span.__exit__(None, None, None)


def _pop_open(key: Union[str, Span, None]) -> Optional[Span]:
    if isinstance(key, Span):
        stack = _open.get(key.lane)
        if stack and key in stack:
            stack.remove(key)
        return None if key.done else key
    rec = STATE.tracer
    lanes = []
    if rec is not None:
        lanes.append(rec.lane())
    lanes += [lane for lane in list(_open) if lane not in lanes]
    for lane in lanes:
        stack = _open.get(lane) or []
        for i in range(len(stack) - 1, -1, -1):
            if stack[i].name == key:
                return stack.pop(i)
    return None


def trace_instant(name: str, cat: str = "user", args: Optional[dict] = None) -> None:
    """A zero-length marker (Chrome Trace instant event)."""
    rec = STATE.tracer
    if rec is None:
        return
    try:
        ident, task = rec.lane()
        rec.add(("i", name, cat, _monotonic_ns(), 0, ident, task, args, STATE.stage, STATE.iteration))
    except Exception:
        pass


def trace_func(name: Optional[Union[str, Callable]] = None, cat: str = "user") -> Callable:
    """Decorator (bare or with a name): a span around each call of a sync or async function."""

    def decorate(func: Callable) -> Callable:
        inner = func.__func__ if isinstance(func, (staticmethod, classmethod)) else func
        span_name = name if isinstance(name, str) else getattr(inner, "__qualname__", repr(inner))
        return wrap_callable(func, lambda: None if STATE.tracer is None else Span(STATE.tracer, span_name, cat, None))

    if name is not None and not isinstance(name, str):  # bare @trace_func (also over staticmethod / classmethod)
        return decorate(name)
    return decorate


# ------------------------------------------------------------------------------ lifecycle


def init_tracer(cfg: Any = None, role: str = "driver", rank: int = 0) -> Optional[Recorder]:
    """Start this process's recorder if `profiler_config.tracer.enable` is on; returns it (or None).

    `cfg`: a ProfilerConfig, or anything `load_config` takes (YAML path, dict, DictConfig).
    Calling again in the same process with the same role/rank returns the running recorder; with
    another role/rank, the old one is closed first. An unusable output (unwritable directory,
    unreachable collector without fallback) is one warning, and tracing stays off.
    """
    from mindspeed_profiler.config import ProfilerConfig, load_config

    pc = cfg if isinstance(cfg, ProfilerConfig) else load_config(cfg, check_paths=False)
    tc = pc.tracer
    if not tc.enable:
        return None
    if not isinstance(role, str) or not role:
        raise ValueError(f"init_tracer: role must be a non-empty string, got {role!r}")
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 0:
        raise ValueError(f"init_tracer: rank must be an integer >= 0, got {rank!r}")
    with _init_lock:
        current = STATE.tracer
        if current is not None:
            if (current.role, current.rank, current.pid) == (role, rank, os.getpid()):
                return current
            _shutdown_locked()
        timeline_dir = pc.timeline_dir
        try:
            rec = _build_recorder(pc, tc, timeline_dir, role, rank)
        except Exception as exc:
            warn_once(f"tracer-init-{timeline_dir}", f"mindspeed-profiler tracer: cannot start ({exc!r}); tracing is off in this process, training continues")
            return None
        STATE.tracer = rec
        _register_exit_hooks()
        from mindspeed_profiler.signals import install_sigterm_handler

        install_sigterm_handler(shutdown_tracer, order=10)   # then flushes and closes the segment
        return rec


def _build_recorder(pc: Any, tc: Any, timeline_dir: str, role: str, rank: int) -> Recorder:
    fallback = None
    collector = None
    if tc.sink == "collector":
        from mindspeed_profiler.tracing.collector import get_collector

        collector = get_collector(timeline_dir, create=role == "driver")
        if collector is not None:
            fallback = timeline_dir
        else:
            warn_once("tracer-no-collector", "mindspeed-profiler tracer: sink is 'collector' but no trace collector is running (call start_collector() on the driver); writing segments to local files")
    name = formats.segment_name(role, rank, socket.gethostname(), os.getpid())
    sink: Any = CollectorSink(collector, name) if fallback is not None else FileSink(timeline_dir, name)
    rec = Recorder(
        role,
        rank,
        sink,
        flush_every=tc.flush_every_events,
        flush_interval_s=tc.flush_interval_s,
        buffer_max=tc.buffer_max_events,
        clock_sync=tc.clock_sync,
        clock_sync_rounds=tc.clock_sync_rounds,
        sink_kind=tc.sink,
        run_id=resolve_run_id(pc)[0],
        fallback_dir=fallback,
        start_thread=False,
    )
    # Open and write the header now: an unusable destination is found at init, not mid-training.
    if isinstance(sink, FileSink):
        sink.write(b"")  # raises here (one warning from init_tracer) if the directory is unusable
    rec.flush()
    rec.start()
    return rec


def shutdown_tracer() -> None:
    """Flush and close this process's recorder (also runs at interpreter exit). Safe to call twice."""
    with _init_lock:
        _shutdown_locked()


def _shutdown_locked() -> None:
    rec = STATE.tracer
    STATE.tracer = None
    _open.clear()
    if rec is not None:
        try:
            rec.close()
        except Exception as exc:
            warn_once("tracer-close", f"mindspeed-profiler tracer: close failed ({exc!r})")


def flush_tracer() -> None:
    """Write what is buffered now (e.g. before a risky step)."""
    rec = STATE.tracer
    if rec is not None:
        rec.flush()


def get_tracer() -> Optional[Recorder]:
    return STATE.tracer


def merge_timeline(cfg: Any = None) -> Optional["os.PathLike"]:
    """After the run, on the driver: merge every process's segment into the timeline file the
    config asks for (`tracer.output_dir`, `tracer.gzip`). Returns its path, or None when the tracer
    is off. Raises FileNotFoundError when there are no segments."""
    from mindspeed_profiler.analysis.merge import write_timeline
    from mindspeed_profiler.config import ProfilerConfig, load_config

    pc = cfg if isinstance(cfg, ProfilerConfig) else load_config(cfg, check_paths=False)
    if not pc.tracer.enable:
        return None
    return write_timeline(pc.timeline_dir, gzip=pc.tracer.gzip)


def _after_fork_in_child() -> None:
    # A forked child inherits the recorder but not its flusher thread: stop tracing there rather
    # than writing into the parent's segment.
    STATE.tracer = None
    _open.clear()


def _register_exit_hooks() -> None:
    global _atexit_registered
    if _atexit_registered:
        return
    _atexit_registered = True
    atexit.register(shutdown_tracer)
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_after_fork_in_child)
