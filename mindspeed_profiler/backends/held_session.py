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
import json
import os
import threading
from pathlib import Path
from typing import Any, Callable

import orjson

from mindspeed_profiler.backends.trace_files import check_whole_json, timed

WINDOW_PREFIX = "mindspeed_profiler/window/"
# events that run on a device after the host launched them: a window keeps those that begin before
# the next window does (a kernel launched at the window's end runs after it)
DEVICE_CATS = frozenset({"kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation", "ac2g", "cuda_runtime_sync"})


def cut_windows(trace: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Pure: a held session's Kineto trace cut into the part each window recorded, by window id:
    the metadata events, the host events inside the window's range, the device events (and flows)
    from its start to the next window's start (a kernel launched at the window's end runs after
    it); the window's own range dropped, torch's whole-session `Trace` event clipped to it. One
    pass over the events."""
    events = trace.get("traceEvents") or []
    spans = sorted(((float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0)), e["name"][len(WINDOW_PREFIX):], id(e))
                    for e in events if e.get("ph") == "X" and str(e.get("name", "")).startswith(WINDOW_PREFIX)))
    if not spans:
        return {}
    starts = [s[0] for s in spans]
    markers = {s[3] for s in spans}
    meta_events: list[dict] = []
    kept: list[list[dict]] = [[] for _ in spans]
    for e in events:
        if "ts" not in e or e.get("ph") == "M":
            meta_events.append(e)
            continue
        if id(e) in markers:
            continue
        if e.get("cat") == "Trace":   # torch's range of the whole session: each window's range instead
            for k, (start, end, _, _) in enumerate(spans):
                kept[k].append({**e, "ts": start, "dur": end - start})
            continue
        ts = float(e["ts"])
        k = bisect.bisect_right(starts, ts) - 1
        if k < 0:
            continue
        if ts <= spans[k][1] or e.get("cat") in DEVICE_CATS or e.get("ph") in ("s", "f", "t"):
            kept[k].append(e)
    return {name: {**trace, "traceEvents": meta_events + kept[k]} for k, (_, _, name, _) in enumerate(spans)}


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
    """The writer's part of a flush: the whole trace read once, each window's part written into its
    capture directory (timed as `cut`), each capture completed (compressed, its metadata final)."""
    trace = None
    if error is None and whole is not None:
        try:
            with timed(phases, "cut"):
                trace = _loads(whole.read_bytes())
        except Exception as exc:
            error = f"the held session's trace could not be read: {type(exc).__name__}: {exc}"
    cut: dict[str, dict[str, Any]] = {}
    if trace is not None:
        with timed(phases, "cut"):
            cut = cut_windows(trace)
        trace = None
    parts: list[tuple[HeldWindow, list[Path], str | None]] = []
    for w in windows:
        files, note = [], error
        if error is None:
            with timed(phases, "cut"):
                files, note = _write_part(cut.get(w.name), w)
        parts.append((w, files, note))
    if whole is not None:
        try:
            whole.unlink()
        except OSError:
            pass
    for w, files, note in parts:
        w.complete(files, note, phases)


def _write_part(part: dict[str, Any] | None, w: HeldWindow) -> tuple[list[Path], str | None]:
    """Window `w`'s part of the session's trace written at `w.raw`: ([that file], None), or ([], why not)."""
    if part is None:
        return [], f"the held session's trace has no range for this window ({WINDOW_PREFIX}{w.name})"
    try:
        with open(w.raw, "wb") as fh:
            fh.write(_dumps(part))
    except Exception as exc:
        try:
            w.raw.unlink()
        except OSError:
            pass
        return [], f"the window's trace could not be written: {type(exc).__name__}: {exc}"
    return [w.raw], None


def _loads(data: bytes) -> Any:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:   # what orjson refuses (NaN) the stdlib reads
        return json.loads(data)


def _dumps(obj: Any) -> bytes:
    try:
        return orjson.dumps(obj)
    except TypeError:   # what orjson cannot write (NaN read by the stdlib, huge ints)
        return json.dumps(obj).encode()


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
