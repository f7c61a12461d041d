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

from mindspeed_profiler.core.state import STATE
from mindspeed_profiler.core import formats
from mindspeed_profiler.runtime.manifest import resolve_run_id
from mindspeed_profiler.core.warn import warn_once
from mindspeed_profiler.tracing.marker_metrics import refresh_switch
from mindspeed_profiler.tracing.wrap import wrap_callable
from mindspeed_profiler.tracing.recorder import Recorder
from mindspeed_profiler.tracing.sinks import CollectorSink, FileSink

_monotonic_ns = time.monotonic_ns
_get_running_loop = asyncio._get_running_loop
_NULL = contextlib.nullcontext()  # stateless and reentrant: one shared instance
_atexit_registered = False
_init_lock = threading.Lock()


class Span:
    """A span being recorded (returned by `trace_span` and `trace_begin`).

    The recording thread pays for __enter__ and __exit__ only: __enter__ reads the stage /
    iteration and the clock; __exit__ reads the clock, then the lane (the thread and asyncio task
    that close the span: for a `with` block, those that opened it), and adds those fields to the
    recorder's flat buffer (recorder.py: the event layout); lanes, names, durations, args and JSON
    are the flusher thread's work. Nothing of the span object is kept: buffered span objects (or a
    tuple per span) would be tracked by the garbage collector and make collections more frequent
    and longer. A closed span (`rec` None) records nothing more. `opened_on`: the lane trace_begin
    keeps its handle under (set by trace_begin only).
    """

    __slots__ = ("rec", "name", "cat", "args", "start", "stage", "iteration", "opened_on")

    def __init__(self, rec: Recorder, name: str, cat: str, args: Optional[dict]):
        self.rec = rec
        self.name = name
        self.cat = cat
        self.args = args

    def __enter__(self) -> "Span":
        # no closed-span check: entering a closed span sets fields that its __exit__ never records
        self.stage = STATE.stage
        self.iteration = STATE.iteration
        self.start = _monotonic_ns()
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        end = _monotonic_ns()
        rec = self.rec
        if rec is None:
            return False
        self.rec = None
        args = self.args
        if exc_type is not None:
            args = dict(args or {})
            args["error"] = exc_type.__name__
        # rec.lane() inlined, after the clock: this and __enter__ are the tracer's whole hot path
        try:
            ident = rec._this_thread.ident
        except AttributeError:  # the thread's first span
            ident = rec.register_thread()
        event = ("X", self.name, self.cat, self.start, end, ident, 0 if _get_running_loop() is None else rec.task_key(),
                 args, self.stage, self.iteration)
        buf = rec._buf
        if len(buf) < rec.room:  # rec.add() inlined for the common case (no drop, no early flush)
            buf += event
        else:
            rec.add(event)
        return False

    @property
    def done(self) -> bool:
        """True once closed; setting it drops a span not yet closed (the profiler does, for an
        iteration span that saw no stage)."""
        return self.rec is None

    @done.setter
    def done(self, value: bool) -> None:
        if value:
            self.rec = None


_new = object.__new__


def new_span(rec: Recorder, name: str, cat: str, args: Optional[dict]) -> Span:
    """Span(rec, name, cat, args) without the cost of a Python __init__ call (the hot path)."""
    span = _new(Span)
    span.rec = rec
    span.name = name
    span.cat = cat
    span.args = args
    return span


def trace_span(name: str, cat: str = "user", args: Optional[dict] = None) -> Any:
    """Context manager: one complete span around the block (a no-op when tracing is off)."""
    rec = STATE.tracer
    if rec is None:
        return _NULL
    span = _new(Span)  # new_span() inlined: one call less per span
    span.rec = rec
    span.name = name
    span.cat = cat
    span.args = args
    return span


# Spans opened with trace_begin and not yet ended, per lane (for trace_end by name).
_open: dict[tuple[int, int], list] = {}


def trace_begin(name: str, cat: str = "user", args: Optional[dict] = None) -> Optional[Span]:
    """Open a span; close it with `trace_end(name)` or `trace_end(handle)`. Returns the handle."""
    rec = STATE.tracer
    if rec is None:
        return None
    span = new_span(rec, name, cat, args).__enter__()
    span.opened_on = rec.lane()
    _open.setdefault(span.opened_on, []).append(span)
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
        stack = _open.get(getattr(key, "opened_on", None))
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


def trace_complete(name: str, start_ns: int, end_ns: int, cat: str = "user", args: Optional[dict] = None) -> None:
    """A span timed by another process on this host, drawn on this thread's lane: `start_ns`,
    `end_ns` are that process's time.monotonic_ns() (CLOCK_MONOTONIC is one clock for the whole
    host on Linux), e.g. what an inference engine's worker measured of a call made from here.
    Nothing is recorded when tracing is off or end_ns < start_ns."""
    rec = STATE.tracer
    if rec is None or not isinstance(start_ns, int) or not isinstance(end_ns, int) or end_ns < start_ns:
        return
    try:
        ident, task = rec.lane()
        rec.add(("X", name, cat, start_ns, end_ns, ident, task, args, STATE.stage, STATE.iteration))
    except Exception:
        pass


def trace_instant(name: str, cat: str = "user", args: Optional[dict] = None) -> None:
    """A zero-length marker (Chrome Trace instant event)."""
    rec = STATE.tracer
    if rec is None:
        return
    try:
        ident, task = rec.lane()
        now = _monotonic_ns()
        rec.add(("i", name, cat, now, now, ident, task, args, STATE.stage, STATE.iteration))
    except Exception:
        pass


def trace_func(name: Optional[Union[str, Callable]] = None, cat: str = "user") -> Callable:
    """Decorator (bare or with a name): a span around each call of a sync or async function."""

    def decorate(func: Callable) -> Callable:
        inner = func.__func__ if isinstance(func, (staticmethod, classmethod)) else func
        span_name = name if isinstance(name, str) else getattr(inner, "__qualname__", repr(inner))
        def make_span() -> Optional[Span]:
            rec = STATE.tracer
            return None if rec is None else new_span(rec, span_name, cat, None)

        return wrap_callable(func, make_span)

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
        refresh_switch()
        _register_exit_hooks()
        from mindspeed_profiler.runtime.signals import install_sigterm_handler

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
    refresh_switch()
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
    from mindspeed_profiler.analysis.timeline.merge import write_timeline
    from mindspeed_profiler.config import ProfilerConfig, load_config

    pc = cfg if isinstance(cfg, ProfilerConfig) else load_config(cfg, check_paths=False)
    if not pc.tracer.enable:
        return None
    return write_timeline(pc.timeline_dir, gzip=pc.tracer.gzip)


def _after_fork_in_child() -> None:
    # A forked child inherits the recorder but not its flusher thread: stop tracing there rather
    # than writing into the parent's segment.
    STATE.tracer = None
    refresh_switch()
    _open.clear()


def _register_exit_hooks() -> None:
    global _atexit_registered
    if _atexit_registered:
        return
    _atexit_registered = True
    atexit.register(shutdown_tracer)
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_after_fork_in_child)
