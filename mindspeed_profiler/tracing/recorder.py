"""The per-process span recorder: append to memory on the hot path, encode and write in a thread.

Hot path (`add`, and its inlined copy in api.Span.__exit__): one length check against `room` and one
list extend by one event's fields; no I/O, no locks, no RPC. A flusher thread
wakes every `flush_interval_s` (or early, once `flush_every` events are waiting), takes the
buffered events, encodes the batch and hands it to the sink. A full buffer drops and counts, never blocks.
Nothing here raises into user code: sink failures are reported once and recording goes on
(falling back from a collector to a local file when one is configured).
"""
from __future__ import annotations

import asyncio
import io
import threading
import time
from typing import Any, Optional

from mindspeed_profiler.core import formats
from mindspeed_profiler.core.warn import warn_once
from mindspeed_profiler.config import TracerConfig
from mindspeed_profiler.tracing import segment
from mindspeed_profiler.tracing.clock import ClockAnchor, OffsetEstimate, take_anchor
from mindspeed_profiler.tracing.sinks import FileSink

_get_ident = threading.get_ident
_get_running_loop = asyncio._get_running_loop  # C fast path; public get_running_loop raises when none
_current_task = asyncio.current_task
_monotonic_ns = time.monotonic_ns

# Event layout: EVENT_WIDTH fields, positional, the buffer a flat list of them back to back:
#   (ph, name, cat, start_mono_ns, end_mono_ns, thread_ident, task_id, args, stage, iteration)
# Flat, so that a span adds no object of its own to the buffer: a tuple per span is tracked by the
# garbage collector until its first collection (~60 ns of a ~1 us span went to gen-0 collections
# over them), and `list += tuple` of a short-lived tuple reuses the tuple free list. One `+=` is
# atomic under the GIL, so the buffer always holds whole events. The end rather than the duration:
# `end - start` allocates an int on the hot path; the flusher subtracts.
EVENT_WIDTH = 10


class Recorder:
    """One per process (STATE.tracer). Create through `init_tracer`."""

    def __init__(
        self,
        role: str,
        rank: int,
        sink: Any,
        *,
        flush_every: int = TracerConfig.flush_every_events,
        flush_interval_s: float = TracerConfig.flush_interval_s,
        buffer_max: int = TracerConfig.buffer_max_events,
        clock_sync: bool = TracerConfig.clock_sync,
        clock_sync_rounds: int = TracerConfig.clock_sync_rounds,
        sink_kind: str = TracerConfig.sink,
        run_id: Optional[str] = None,
        fallback_dir: Optional[str] = None,
        start_thread: bool = True,
    ):
        self.role = role
        self.rank = rank
        self.sink = sink
        self.flush_every = max(1, int(flush_every))
        self.flush_interval_s = float(flush_interval_s)
        self.buffer_max = max(1, int(buffer_max))
        self.clock_sync = bool(clock_sync)
        self.clock_sync_rounds = max(1, int(clock_sync_rounds))
        self.anchor: ClockAnchor = take_anchor()
        # the settings go into the header: a segment says how it was recorded
        settings = {"flush_every_events": self.flush_every, "flush_interval_s": self.flush_interval_s,
                    "buffer_max_events": self.buffer_max, "sink": sink_kind, "clock_sync": self.clock_sync,
                    "clock_sync_rounds": self.clock_sync_rounds}
        self.header = segment.make_header(role, rank, self.anchor.wall_ns, self.anchor.mono_ns,
                                          {formats.RUN_ID_KEY: run_id, "tracer": settings})
        self.pid = self.header["pid"]
        self.recorded = 0
        self.dropped = 0
        self.failed_writes = 0
        self._fallback_dir = fallback_dir
        self._buf: list = []  # flat: EVENT_WIDTH fields per event (see the layout above)
        self._threads: dict[int, tuple[int, str]] = {}
        # .ident is set on a thread's first span (register_thread()): one lookup instead of
        # get_ident() plus a dict check per span
        self._this_thread = threading.local()
        self._tasks: dict[int, str] = {}
        self._lanes: dict[tuple[int, int], int] = {}
        self._records: list[Any] = []  # non-event records waiting for the next flush
        self._header_sent = False
        self._stats_sent: tuple[int, int, int] = (-1, -1, -1)
        self._broken = False
        self._closed = False
        self._kicked = False
        self.room = self._room()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._thread: Optional[threading.Thread] = None
        if start_thread:
            self.start()

    def start(self) -> None:
        """Start the flusher thread (once)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="mindspeed-tracer-flush", daemon=True)
            self._thread.start()

    # ---------------------------------------------------------------- hot path
    def now_wall_ns(self) -> int:
        """This process's wall clock as the tracer sees it (anchor + monotonic)."""
        return self.anchor.to_wall(_monotonic_ns())

    def lane(self) -> tuple[int, int]:
        """(thread ident, asyncio task id or 0): spans on one lane nest properly."""
        try:
            ident = self._this_thread.ident
        except AttributeError:
            ident = self.register_thread()
        if _get_running_loop() is None:
            return ident, 0
        return ident, self.task_key()

    def register_thread(self) -> int:
        """Note the calling thread's OS id and name (read on the thread: it may be gone by the
        flush); returns its ident."""
        ident = _get_ident()
        # setdefault: an ident the OS reused for a later thread keeps the first thread's lane name
        self._threads.setdefault(ident, (threading.get_native_id(), threading.current_thread().name))
        self._this_thread.ident = ident
        return ident

    def task_key(self) -> int:
        """id of the running asyncio task (0 outside a task); its name is kept for the lane's label."""
        task = _current_task()
        if task is None:
            return 0
        key = id(task)
        if key not in self._tasks:
            self._tasks[key] = task.get_name()
        return key

    @property
    def buffered(self) -> int:
        """Events waiting for the flusher."""
        return len(self._buf) // EVENT_WIDTH

    def add(self, event: tuple) -> None:
        """Buffer one event (a tuple in the layout above); a full buffer drops and counts it."""
        if len(event) != EVENT_WIDTH:  # one short event would shift every later one in the flat buffer
            raise ValueError(f"Recorder.add: an event has {EVENT_WIDTH} fields (recorder.py: the event layout), got {len(event)}")
        buf = self._buf
        if len(buf) >= self.buffer_max * EVENT_WIDTH:
            self.dropped += 1
            return
        buf += event
        if len(buf) >= self.flush_every * EVENT_WIDTH and not self._kicked:
            self.kick()

    def kick(self) -> None:
        """Wake the flusher early (the buffer reached flush_every)."""
        self._kicked = True
        self.room = self._room()
        self._wake.set()

    def _room(self) -> int:
        """Below this buffer length (in fields) an event needs no drop and no early flush: the hot
        path then adds it without calling add() (one comparison instead of two)."""
        events = self.buffer_max if self._kicked else min(self.buffer_max, self.flush_every - 1)
        return events * EVENT_WIDTH

    # ---------------------------------------------------------------- control
    def set_clock_offset(self, est: OffsetEstimate, reference: str) -> None:
        """Record this process's offset to the reference (driver) clock; applied at merge."""
        self.header["offset_ns"] = est.offset_ns
        self._records.append(
            {
                "type": formats.SEG_CLOCK,
                "offset_ns": est.offset_ns,
                "uncertainty_ns": est.uncertainty_ns,
                "rtt_ns": est.rtt_ns,
                "samples": est.samples,
                "reference": reference,
                "at_wall_ns": self.now_wall_ns(),
            }
        )
        self.flush()

    def flush(self, final: bool = False) -> None:
        """Drain the buffer into the sink (thread-safe; never raises)."""
        try:
            with self._lock:
                self._flush_locked(final)
        except Exception as exc:  # a bug here must still not reach the training loop
            warn_once(f"tracer-flush-{self.pid}", f"mindspeed-profiler tracer: flush failed ({exc!r}); spans may be lost")

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._wake.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=max(5.0, 2 * self.flush_interval_s))
        self.flush(final=True)
        try:
            self.sink.close()
        except Exception as exc:
            self._sink_failed(exc)

    # ---------------------------------------------------------------- flusher side
    def _run(self) -> None:
        while not self._closed:
            self._wake.wait(self.flush_interval_s)
            self._wake.clear()
            if self._closed:
                break
            self.flush()

    def _flush_locked(self, final: bool) -> None:
        self._kicked = False
        self.room = self._room()
        # Encode line by line into one buffer (streaming: no list of per-event objects kept alive).
        out = io.BytesIO()
        write, dumps = out.write, segment.dumps_line
        records, self._records = self._records, []
        for r in records:
            write(dumps(r))
        buf, lanes = self._buf, self._lanes
        # Take what is there now; spans the recording threads add meanwhile stay for the next
        # flush (each slice operation is atomic, and `+=` only appends).
        taken = len(buf)
        fields = buf[:taken]
        del buf[:taken]
        n = taken // EVENT_WIDTH
        it = iter(fields)
        for ph, name, cat, start, end, ident, task, args, stage, iteration in zip(*(it,) * EVENT_WIDTH):
            try:
                dur = end - start
                lane = lanes.get((ident, task))
                if lane is None:
                    tid, tname = self._threads.get(ident, (ident, f"thread-{ident}"))
                    thread = dumps({"type": formats.SEG_THREAD, "lane": len(lanes) + 1, "tid": tid, "name": tname,
                                    "task": self._tasks.get(task) if task else None})
                    lane = lanes[(ident, task)] = len(lanes) + 1
                    write(thread)
                if stage is not None or iteration is not None:
                    args = _with_context(args, stage, iteration)
                write(dumps((ph, name, cat, start, dur, lane, args or None)))  # a JSON array, as a list would be
            except Exception as exc:   # one event that cannot be written (an argument whose repr() raises) costs itself only
                n -= 1
                self.dropped += 1
                what = repr(name[:80]) if isinstance(name, str) else f"a name of type {type(name).__name__}"
                warn_once(f"tracer-event-{self.pid}", f"mindspeed-profiler tracer: a span ({what}) could not be written "
                          f"({type(exc).__name__}: {str(exc)[:200]}); it is dropped and counted in the segment's stats, "
                          "the other spans are kept")
        self.recorded += n
        stats = (self.recorded, self.dropped, self.failed_writes)
        if final or (stats != self._stats_sent and (self.dropped or self.failed_writes)):
            write(dumps({"type": formats.SEG_STATS, "recorded": stats[0], "dropped": stats[1], "failed_writes": stats[2]}))
            self._stats_sent = stats
        if final:
            write(dumps({"type": formats.SEG_CLOSE, "at_wall_ns": self.now_wall_ns()}))
        if self._broken:
            self.dropped += n
            return
        body = out.getvalue()
        if body or not self._header_sent:
            self._write(body, n)

    def _write(self, body: bytes, n_events: int) -> None:
        if isinstance(self.sink, FileSink) and self.sink.lost():
            warn_once(f"tracer-lost-{self.pid}", f"mindspeed-profiler tracer: {self.sink.describe()} was removed while "
                      "the run was writing it; a new segment file starts there (spans already flushed to the removed "
                      "file are gone)")
            self._header_sent = False   # the new file starts with the header
        header = b"" if self._header_sent else segment.dumps_line(self.header)
        try:
            self.sink.write(header + body)
            self._header_sent = True
            return
        except Exception as exc:
            self.failed_writes += 1
            switched = self._sink_failed(exc)
        if switched:  # retry this batch once on the fallback file, with a header
            try:
                self.sink.write(segment.dumps_line(self.header) + body)
                self._header_sent = True
                return
            except Exception as exc:
                self._sink_failed(exc)
        self.dropped += n_events

    def _sink_failed(self, exc: BaseException) -> bool:
        """Report once; switch to a local file if possible (returns True), else stop writing."""
        where = self.sink.describe() if hasattr(self.sink, "describe") else repr(self.sink)
        if self._fallback_dir and not isinstance(self.sink, FileSink):
            warn_once(
                f"tracer-sink-{self.pid}",
                f"mindspeed-profiler tracer: cannot write to {where} ({exc!r}); "
                f"writing this process's segment to {self._fallback_dir} instead; training continues",
            )
            self.sink = FileSink(self._fallback_dir, formats.segment_name(self.role, self.rank, self.header["host"], self.pid))
            self._header_sent = False
            return True
        warn_once(
            f"tracer-sink-{self.pid}",
            f"mindspeed-profiler tracer: cannot write to {where} ({exc!r}); "
            "spans from this process are dropped from now on; training continues",
        )
        self._broken = True
        return False


def _with_context(args: Optional[dict], stage: Optional[str], iteration: Optional[int]) -> dict:
    """The span's args plus the RL stage / iteration current when it started (user keys win)."""
    out = dict(args) if args else {}
    if stage is not None:
        out.setdefault("stage", stage)
    if iteration is not None:
        out.setdefault("iteration", iteration)
    return out
