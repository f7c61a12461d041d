"""One torch.profiler session held open across capture windows (`integrated.export_after_run`).

torch's stop (Kineto's post-processing of every event) and its JSON write run on the thread that
started the capture and hold the GIL: seconds per capture on a large model, inside the step that
closes it (docs/perf_capture.md). With export_after_run the torch backend starts one session at the
first window and keeps it: a window's end turns collection off (torch's public
`toggle_collection_dynamic`, ~50 µs), the next window turns it on again, and torch's stop and write
run once: when the run ends (the owner profiler's stop(), interpreter exit, SIGTERM), or earlier
when a capture needs other options or the held session grew the process past
`capture_memory_budget_mb`. The one trace is then cut into each window's capture directory, by the
window's own range (an annotation named WINDOW_PREFIX + the capture's name), on the background
writer (runtime/export_writer.py).

What it costs instead: torch toggles op and device collection only, so memory events
(profile_memory) and Python frames (with_stack) go on being recorded between windows (the cut drops
them; they grow the session a little); and a process killed before the end of its run loses its held
windows: their metadata says "held", and the analysis reports each as recorded but never written.

The one documented global: `HELD` (a process has at most one held session; a fork's child none).
"""
from __future__ import annotations

import bisect
import os
import threading
from pathlib import Path
from typing import Any, Callable

import msgspec

from mindspeed_profiler.backends.trace_files import check_whole_json, timed

WINDOW_PREFIX = "mindspeed_profiler/window/"
# events that run on a device after the host launched them: a window keeps those that begin before
# the next window does (a kernel launched at the window's end runs after it)
DEVICE_CATS = frozenset({"kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation", "ac2g", "cuda_runtime_sync"})


class _Head(msgspec.Struct):
    """What the cut reads of an event; the rest of it is copied as it was written (msgspec.Raw).
    The types are the rule for its numbers (an int read as a float; a time that is no number fails
    the cut, and the session's trace is kept whole: _cut_all)."""

    ph: Any = None
    ts: float | None = None
    dur: float | None = 0.0
    cat: Any = None
    name: Any = None


_HEAD = msgspec.json.Decoder(_Head)


def cut_session(data: bytes) -> dict[str, bytes]:
    """Pure: a held session's Kineto trace (its JSON bytes) cut into the part each window recorded,
    by window id: the metadata events, the host events inside the window's range, the device events
    (and flows) from its start to the next window's start (a kernel launched at the window's end runs
    after it); the window's own range dropped, torch's whole-session `Trace` event clipped to it. Each
    event is copied as torch wrote it (only ph, ts, dur, cat and name are decoded): ~100 MB of memory
    for a 54 MB trace, where decoding it to Python objects took ~6x that. Raises msgspec.DecodeError
    on what is not JSON (a NaN, a cut-off file)."""
    top = msgspec.json.decode(data, type=dict[str, msgspec.Raw])
    raws = msgspec.json.decode(top.get("traceEvents", b"[]"), type=list[msgspec.Raw])
    heads = [_HEAD.decode(r) for r in raws]
    spans = sorted((h.ts, h.ts + (h.dur or 0.0), h.name[len(WINDOW_PREFIX):], i)
                   for i, h in enumerate(heads)
                   if h.ph == "X" and h.ts is not None and isinstance(h.name, str) and h.name.startswith(WINDOW_PREFIX))
    if not spans:
        return {}
    starts = [s[0] for s in spans]
    markers = {s[3] for s in spans}
    meta_events: list[Any] = []
    kept: list[list[Any]] = [[] for _ in spans]
    for i, (h, raw) in enumerate(zip(heads, raws)):
        ts = h.ts
        if ts is None or h.ph == "M":
            meta_events.append(raw)
            continue
        if i in markers:
            continue
        if h.cat == "Trace":   # torch's range of the whole session: each window's range instead
            event = msgspec.json.decode(raw)
            for k, (start, end, _, _) in enumerate(spans):
                kept[k].append(msgspec.json.encode({**event, "ts": start, "dur": end - start}))
            continue
        k = bisect.bisect_right(starts, ts) - 1
        if k < 0:
            continue
        if ts <= spans[k][1] or h.cat in DEVICE_CATS or h.ph in ("s", "f", "t"):
            kept[k].append(raw)
    rest = b"".join(msgspec.json.encode(key) + b":" + bytes(value) + b"," for key, value in top.items()
                    if key != "traceEvents")
    return {name: b"{" + rest + b'"traceEvents":[' + b",".join(meta_events + kept[k]) + b"]}"
            for k, (_, _, name, _) in enumerate(spans)}


def cut_windows(trace: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Pure: cut_session on a trace given as Python objects (its parts returned so)."""
    return {name: msgspec.json.decode(part) for name, part in cut_session(msgspec.json.encode(trace)).items()}


class HeldWindow:
    """A window recorded in the held session, waiting for its flush: `raw` is where its cut trace
    goes; `complete(files, note, flush phases)` finishes its capture (runs on the writer); `attach(job)` tells the
    capture which writer job that is."""

    __slots__ = ("name", "raw", "complete", "attach")

    def __init__(self, name: str, raw: Path, complete: Callable[[list[Path], str | None, dict[str, float]], None],
                 attach: Callable[[Any], None]):
        self.name, self.raw, self.complete, self.attach = name, raw, complete, attach


class HeldSession:
    """The process's held torch.profiler session: windows opened and closed by toggling collection,
    stopped and written once at `flush`."""

    def __init__(self, key: tuple, prof: Any, activities: list[Any], rss0: int | None = None):
        self.key = key            # the profile options: a capture needing others flushes this one
        self.prof = prof
        self.activities = activities
        self.rss0 = rss0          # resident bytes when it began (the memory budget: runtime/captures.py)
        self.started = False
        self.thread = threading.get_ident()   # torch stops a session only on the thread that started it
        self._range = None
        self.windows: list[HeldWindow] = []
        self.recorded = 0         # windows recorded in it, flushed or not

    def open_window(self, name: str) -> str:
        """Recording begins for capture `name`: the session starts, or its collection turns back on.
        Returns the window's id in the session (what HeldWindow.name must be)."""
        import torch

        if not self.started:
            self.prof.start_trace()
            self.started = True
        else:
            self.prof.toggle_collection_dynamic(True, self.activities)
        self.recorded += 1
        window = f"{self.recorded}:{name}"   # one capture name may recur (per-stage captures of one step)
        self._range = torch.autograd.profiler.record_function(WINDOW_PREFIX + window)
        self._range.__enter__()
        return window

    def close_window(self) -> None:
        """The window's end: its range closes and collection turns off (the session stays open)."""
        rng, self._range = self._range, None
        if rng is not None:
            rng.__exit__(None, None, None)
        self.prof.toggle_collection_dynamic(False, self.activities)

    def hold(self, window: HeldWindow) -> None:
        self.windows.append(window)

    def flush(self, submit: Callable[[str, Callable[[], None]], Any]) -> dict[str, float]:
        """torch's stop and write now, on this thread (torch requires the one that started it); the
        cut and each window's completion as one job given to `submit` (the writer). Returns the
        phases. Never raises: a window that could not be written is completed with a note."""
        if self._range is not None:
            self.close_window()
        windows, self.windows = self.windows, []
        phases: dict[str, float] = {}
        whole: Path | None = None
        error = None
        try:
            with timed(phases, "stop"):
                if not self.started:   # created, never recorded: Kineto needs a start before its stop
                    self.prof.start_trace()
                else:
                    # collection back on before the stop: Kineto drops the device's (CUPTI's) records
                    # of a session stopped with them off (measured on an H200: no kernel at all)
                    self.prof.toggle_collection_dynamic(True, self.activities)
                self.prof.stop_trace()
            if windows:
                whole = windows[0].raw.with_name(f"held_session.{os.getpid()}.json")
                with timed(phases, "write"):
                    self.prof.export_chrome_trace(str(whole))
                check_whole_json(whole)
        except Exception as exc:
            other = threading.get_ident() != self.thread
            error = (f"torch's stop or write of the held session failed: {type(exc).__name__}: {exc}"
                     + (" (it was stopped from another thread than the one that started it)" if other else ""))
            if whole is not None:   # a half-written session trace must not keep a full disk full
                try:
                    whole.unlink()
                except OSError:
                    pass
                whole = None
        self.prof = None
        if not windows:
            return phases
        job = submit("held session", lambda: _cut_all(whole, windows, error, phases))
        for w in windows:
            w.attach(job)
        return phases


def _cut_all(whole: Path | None, windows: list[HeldWindow], error: str | None, phases: dict[str, float]) -> None:
    """The writer's part of a flush: the whole trace cut once (timed as `cut`), each window's part
    written into its capture directory, each capture completed (compressed, its metadata final). The
    session's trace is removed once cut and every part written; kept, and named in the notes, when
    it could not be cut or a part could not be written."""
    parts: dict[str, bytes] = {}
    if error is None and whole is not None:
        try:
            with timed(phases, "cut"):
                parts = cut_session(whole.read_bytes())
        except Exception as exc:
            error = (f"the held session's trace could not be cut ({type(exc).__name__}: {exc}); it is kept "
                     f"whole at {whole}")
            whole = None   # kept for the user
    done: list[tuple[HeldWindow, list[Path], str | None]] = []
    for w in windows:
        files, note = [], error
        if error is None:
            with timed(phases, "cut"):
                files, note = _write_part(parts.pop(w.name, None), w)
        done.append((w, files, note))
    if whole is not None and any(not files for _, files, _ in done):
        # a window not written (a full disk): the session's trace is its only copy, kept and named
        done = [(w, files, note if files else f"{note}; the held session's whole trace is kept at {whole}")
                for w, files, note in done]
    elif whole is not None:
        try:
            whole.unlink()
        except OSError:
            pass
    for w, files, note in done:
        w.complete(files, note, phases)


def _write_part(part: bytes | None, w: HeldWindow) -> tuple[list[Path], str | None]:
    """Window `w`'s part of the session's trace written at `w.raw`: ([that file], None), or ([], why not)."""
    if part is None:
        return [], f"the held session's trace has no range for this window ({WINDOW_PREFIX}{w.name})"
    try:
        with open(w.raw, "wb") as fh:
            fh.write(part)
    except Exception as exc:
        try:
            w.raw.unlink()
        except OSError:
            pass
        return [], f"the window's trace could not be written: {type(exc).__name__}: {exc}"
    return [w.raw], None


HELD: HeldSession | None = None


def current() -> HeldSession | None:
    return HELD


def set_current(held: HeldSession | None) -> None:
    global HELD
    HELD = held


def _forget_after_fork() -> None:
    """A forked child does not own its parent's torch session."""
    global HELD
    HELD = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)
