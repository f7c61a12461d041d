"""The captures of one enabled profiler: choosing the backend, opening a capture when the plan
and the gates say so, stepping the continuous one, closing and exporting, writing the metadata,
the trace size budget. Any exception from a backend is caught, logged once, written into the
capture's metadata, and that capture is abandoned: training goes on.

The profiler (profiler.py) and the stage scope (stage_scope.py) drive it through its public
methods, in the order runtime/boundary.py declares.
"""
from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from mindspeed_profiler.core import fileio, formats
from mindspeed_profiler.runtime import export_writer, session
from mindspeed_profiler.capture import stages as _stages
from mindspeed_profiler.core.state import STATE
from mindspeed_profiler.backends import Backend, CaptureHandle, CaptureSpec, held_session, layout, select_backend
from mindspeed_profiler.backends.honour import capture_options
from mindspeed_profiler.backends.registry import AUTO, backend_class
from mindspeed_profiler.backends.trace_files import timed
from mindspeed_profiler.runtime.host_memory import rss_bytes
from mindspeed_profiler.runtime.manifest import capture_metadata
from mindspeed_profiler.runtime.spans import ScopedWarn, Spans
from mindspeed_profiler.capture.schedule import Plan

if TYPE_CHECKING:
    from mindspeed_profiler.config import IntegratedConfig

# the suffix of a failed capture's (metadata-only) directory when no backend could be chosen
_FALLBACK_SUFFIX = "pt"


class Capture:
    """One capture in flight: the backend handle, its spec and its metadata."""

    __slots__ = ("handle", "spec", "meta", "failed", "backend_name", "suffix", "rss0", "job", "left", "bytes", "__weakref__")

    def __init__(self, handle: CaptureHandle | None, spec: CaptureSpec, meta: dict[str, Any], backend_name: str,
                 suffix: str):
        self.handle = handle
        self.spec = spec
        self.meta = meta
        self.failed = False
        self.backend_name = backend_name
        self.suffix = suffix
        self.rss0: int | None = None   # resident bytes when it began recording (the memory budget)
        self.job: export_writer.Job | None = None   # its background export, while one runs
        self.left: list[str] = []      # the deferred export steps not done yet
        self.bytes = 0                 # what its directory holds, as counted for trace_size_budget_mb


def _lightweight_if_asked(cfg: IntegratedConfig, backend: Backend) -> Backend:
    """level_none on a backend that cannot record annotations alone (torch records every op to see
    them): record them ourselves instead of opening its session (backends/markers.py)."""
    if cfg.profile_level == "level_none" and not backend.annotation_only_mode:
        from mindspeed_profiler.backends.markers import MarkersBackend

        return MarkersBackend(device=backend.device)
    return backend


class Identity:
    """Who captures: the names and numbers every capture's directory and metadata carry."""

    __slots__ = ("role", "rank", "world_size", "local_rank", "run_id", "host", "request_id")

    def __init__(self, role: str, rank: int, world_size: int, local_rank: int | None, run_id: str, host: str,
                 request_id: str | None):
        self.role, self.rank, self.world_size, self.local_rank = role, rank, world_size, local_rank
        self.run_id, self.host, self.request_id = run_id, host, request_id


class Captures:
    """The capture lifecycle of one enabled profiler (see the module docstring)."""

    def __init__(self, cfg: IntegratedConfig, plan: Plan, who: Identity, rank_selected: bool,
                 backend: Backend | None, spans: Spans, warn: ScopedWarn):
        self.cfg = cfg
        self.plan = plan
        self.who = who
        self.rank_selected = rank_selected
        self.backend = backend  # chosen through the registry at the first start unless given
        self.spans = spans
        self.warn = warn
        self.backend_error: BaseException | None = None
        self.continuous: Capture | None = None  # the continuous (stage: all) capture
        self.live: set[Capture] = set()
        self.stage_calls: dict[str, int] = {}
        self.known_stages: set[str] = set()
        self.bytes_written = 0
        self.budget_exceeded = False
        self.notes: list[str] = []
        self.finished: list[dict[str, Any]] = []  # metadata of every finished capture, in order
        self.exporting: list[Capture] = []  # captures whose background export has not finished
        self.wait_s = cfg.export_wait_s     # how long stop() and exit wait for them (session.wait_exports)
        self._meta_lock = threading.Lock()  # the writer thread and this one both rewrite metadata

    # ------------------------------------------------------------------ the boundaries

    def begin(self, iteration: int) -> None:
        """start(): the continuous window that covers `iteration` opened."""
        if self.plan.continuous:
            w = self.plan.window_resumed_at(iteration)
            if w is not None:
                self.continuous = self.open(None, w.first, w.last, w.warmup, w.requested_warmup)

    def step(self, iteration: int) -> None:
        """Iteration `iteration` ends: the continuous capture steps, and closes after its last."""
        cap = self.continuous
        if cap is not None:
            if not cap.failed:
                self.call(cap, "step", cap.handle.step)
            over = self._over_memory_budget(cap, iteration)
            if cap.failed or iteration >= cap.spec.last or over:
                self.continuous = None
                self.close(cap)
        self.stage_calls = {}

    def _over_memory_budget(self, cap: Capture, iteration: int) -> bool:
        """Whether the capture grew the process past capture_memory_budget_mb (noted on it, its
        steps cut to what was recorded); checked at iteration boundaries while it records."""
        budget = self.cfg.capture_memory_budget_mb
        if cap.rss0 is None or budget is None or iteration < cap.spec.first or iteration >= cap.spec.last:
            return False
        now = rss_bytes()
        grown = (now - cap.rss0) / 2**20 if now is not None else 0.0
        if grown <= budget:
            return False
        cap.meta["stopped_early"] = {"reason": "capture_memory_budget_mb", "iteration": iteration,
                                     "grown_mb": round(grown, 1), "budget_mb": budget}
        self._cut(cap, iteration, f"stopped early at the end of iteration {iteration}: the process grew by "
                                  f"{grown:.0f} MB while recording (capture_memory_budget_mb={budget:g})")
        self.warn(("memory-budget",), "profiler capture on %s rank %d stopped early at iteration %d: host memory grew "
                  "%.0f MB while recording, over capture_memory_budget_mb=%g", self.who.role, self.who.rank,
                  iteration, grown, budget)
        return True

    def _cut(self, cap: Capture, iteration: int, note: str) -> None:
        """The capture ends at `iteration` instead of its last: its metadata says what was recorded."""
        cap.meta["notes"].append(note)
        cap.meta["planned_steps"] = [cap.spec.first, cap.spec.last]
        if iteration >= cap.spec.first:  # `steps` says what was recorded, not what was planned
            cap.meta["steps"] = [cap.spec.first, iteration]
            cap.meta["profiled_iterations"] = [cap.meta["profiled_iterations"][0], iteration]

    def next_window(self, iteration: int) -> None:
        """Iteration `iteration` begins: the continuous window beginning there opens (when none is
        open and the plan is continuous: runtime/boundary.py's guard)."""
        w = self.plan.window_beginning_at(iteration)
        if w is not None:
            self.continuous = self.open(None, w.first, w.last, w.warmup, w.requested_warmup)

    def stop(self, iteration: int) -> None:
        """stop() at `iteration`: every live capture closed, saying what a cut window recorded."""
        self.continuous = None
        for cap in sorted(self.live, key=lambda c: c.spec.first):
            if iteration < cap.spec.last:
                self._cut(cap, iteration, f"stopped early: iterations {cap.spec.first}-{iteration} recorded "
                                          f"(iteration {iteration} possibly in part)")
            self.close(cap)

    def stage_call(self, name: str, iteration: int) -> Capture | None:
        """A call of stage `name` begins in `iteration`: its capture when the plan selects it."""
        if name not in self.known_stages and not _stages.is_stage(name):
            self.warn(("stage", name), "stage %r is not registered (register_stage(%r) lets configs select it)", name, name)
        self.known_stages.add(name)
        if not self.plan.stage_call_recorded(name, iteration):
            return None
        call = self.stage_calls[name] = self.stage_calls.get(name, 0) + 1
        return self.open(name, iteration, iteration, 0, 0, call)

    # ------------------------------------------------------------------ one capture

    def get_backend(self) -> Backend | None:
        if self.backend is None and self.backend_error is None:
            try:
                self.backend = _lightweight_if_asked(self.cfg, select_backend(self.cfg.backend))
            except Exception as exc:
                self.backend_error = exc
                self.warn(("backend",), "profiler backend %r unusable on %s rank %d, no captures will be made: %s: %s",
                          self.cfg.backend, self.who.role, self.who.rank, type(exc).__name__, exc)
        return self.backend

    def warm_backend(self) -> None:
        """At the profiler's start, on a rank that captures: what the backend's first capture would
        load inside its step, loaded now (Backend.warm)."""
        if self.rank_selected and self.backend is not None:
            try:
                self.backend.warm()
            except Exception:
                pass

    def _parallel_selected(self) -> bool:
        wanted = self.cfg.profile_parallel_ranks
        if not wanted:
            return True
        from mindspeed_profiler.runtime.megatron import parallel_layout, parallel_selected

        lay = parallel_layout()
        if lay is None:
            note = "profile_parallel_ranks is set but Megatron's parallel state is not initialised: not filtering by it"
            if note not in self.notes:
                self.notes.append(note)
            self.warn(("parallel",), "%s (%s rank %d)", note, self.who.role, self.who.rank)
            return True
        return parallel_selected(lay, wanted)

    def open(self, stage: str | None, first: int, last: int, warmup: int, requested: int, call: int = 1) -> Capture | None:
        """A capture of iterations first..last (of `stage`, or all), started; None when gated off,
        skipped or failed (its metadata written)."""
        if not self.rank_selected or not self._parallel_selected():
            return None
        who = self.who
        backend = self.get_backend()
        backend_name, suffix = self._backend_naming(backend)
        save_dir = str(layout.stage_dir(self.cfg.profile_save_path, stage))
        call = session.claim_call((os.path.abspath(save_dir), who.role, who.rank, first, last), call)
        spec = CaptureSpec(
            save_dir=save_dir,
            worker_name=layout.worker_name(who.role, who.rank, first, last, call, who.host),
            trace_basename=layout.trace_basename(who.role, who.rank),
            first=first, last=last, warmup=warmup, cfg=self.cfg,
        )
        meta = capture_metadata(self.cfg, run_id=who.run_id, role=who.role, stage=stage, rank=who.rank,
                                world_size=who.world_size, local_rank=who.local_rank, first=first, last=last,
                                warmup=warmup, requested_warmup=requested, backend=backend_name,
                                device=backend.device if backend is not None else None, host=who.host,
                                notes=self.notes)
        if who.request_id is not None:
            meta["request_id"] = who.request_id  # an on-demand capture: the request it answers
        cap = Capture(None, spec, meta, backend_name, suffix)
        if self.budget_exceeded:
            meta["status"] = "skipped"
            meta["notes"].append(f"trace_size_budget_mb={self.cfg.trace_size_budget_mb} exceeded "
                                 f"({self.bytes_written / 2**20:.1f} MB written by this process)")
            self._finish(cap)
            return None
        if backend is None:
            self._record_error(cap, "start", self.backend_error or RuntimeError("no backend"))
            self._finish(cap)
            return None
        busy = [c for c in session.LIVE_CAPTURES if c.handle is not None]
        if busy:
            # nested selected stages, or two profilers of one process capturing at once
            what = f"{stage or formats.ALL_DIR} (steps {first}-{last}, call {call})"
            for other in busy:
                note = f"{who.role} {what} ran inside this capture: not captured separately (one profiler session per process)"
                if note not in other.meta["notes"]:
                    other.meta["notes"].append(note)
            self.warn(("overlap", stage), "profiler capture of %s on %s rank %d not started: another capture (%s) is "
                      "recording in this process, and torch / torch_npu allow one at a time; it shows inside that one",
                      what, who.role, who.rank, busy[0].spec.worker_name)
            return None
        try:
            # the backend's options, noting what of the config it does not honour (backends/honour.py)
            meta["options"] = capture_options(backend, self.cfg)
            cap.handle = backend.open(spec)
        except Exception as exc:
            self._fail(cap, "start", exc)
            self._finish(cap)
            return None
        self.live.add(cap)
        session.LIVE_CAPTURES.add(cap)
        if cap.handle.held_key is not None or cap.handle.torch_session:
            self._make_room_for_held(cap.handle.held_key)
        if self.call(cap, "start", cap.handle.start):
            STATE.capture_active = True
            cap.rss0 = rss_bytes()
            held = cap.handle.held
            if held is not None and held.rss0 is None:
                held.rss0 = cap.rss0
            if cap.rss0 is None and self.cfg.capture_memory_budget_mb is not None:
                meta["notes"].append("capture_memory_budget_mb not enforced: this system's resident memory cannot be read")
            self._write_recording_meta(cap)
            return cap
        self.close(cap)
        return None

    def _make_room_for_held(self, key: tuple | None) -> None:
        """export_after_run: the held session is flushed first (inside this step, said in a warning)
        when it was started with other options, a torch capture that is not held begins (`key`
        None: torch allows one session per process), or it has grown the process past
        capture_memory_budget_mb."""
        held = held_session.current()
        if held is None:
            return
        why = None
        budget = self.cfg.capture_memory_budget_mb
        now = rss_bytes()
        if key is None:
            why = "a capture that is not held begins (torch records one session per process)"
        elif held.key != key:
            why = "a capture with other options begins"
        elif budget is not None and held.rss0 is not None and now is not None and (now - held.rss0) / 2**20 > budget:
            why = (f"the held session has grown the process by {(now - held.rss0) / 2**20:.0f} MB, over "
                   f"capture_memory_budget_mb={budget:g}")
        if why is not None:
            self.warn(("held-flush", why[:12]), "profiler on %s rank %d: the held session (export_after_run) is "
                      "stopped and written now, inside this step: %s", self.who.role, self.who.rank, why)
            session.flush_held(why, self.spans)

    def _write_recording_meta(self, cap: Capture) -> None:
        """The metadata, status "recording", as soon as the capture directory exists: a worker
        killed mid-capture leaves a capture the analysis can say was never finished."""
        directory = cap.handle.directory
        if directory is None or not Path(directory).is_dir():
            return
        try:
            fileio.write_json_atomic(Path(directory) / formats.META_FILE, {**cap.meta, "status": "recording"})
        except Exception:
            pass   # the final metadata is written at the end anyway

    def call(self, cap: Capture, phase: str, fn: Callable[[], Any]) -> bool:
        """`fn()` of the capture's handle; False (the capture failed and abandoned) when it raised."""
        try:
            fn()
            return True
        except Exception as exc:
            self._fail(cap, phase, exc)
            return False

    def _record_error(self, cap: Capture, phase: str, exc: BaseException) -> None:
        cap.failed = True
        cap.meta["status"] = "failed"
        cap.meta["errors"].append({"phase": phase, "error": f"{type(exc).__name__}: {exc}", "time": fileio.utc_now_iso()})
        self.warn((phase, type(exc).__name__),
                  "profiler %s failed (%s rank %d, stage %s, steps %d-%d, backend %s); capture abandoned, training goes on: %s: %s",
                  phase, self.who.role, self.who.rank, cap.meta["stage"], cap.spec.first, cap.spec.last,
                  cap.backend_name, type(exc).__name__, exc)

    def _fail(self, cap: Capture, phase: str, exc: BaseException) -> None:
        self._record_error(cap, phase, exc)
        if cap.handle is not None:
            cap.handle.abandon()

    def close(self, cap: Capture) -> None:
        """Stop, export what must be written now, write the metadata; what can wait goes to the
        background writer (or runs here with background_export: false). Never raises."""
        if cap not in self.live:
            return
        self.live.discard(cap)
        session.LIVE_CAPTURES.discard(cap)
        # the export can take seconds: show it on the timeline as the profiler's own span
        span = self.spans.enter(formats.SPAN_PROFILER_EXPORT, formats.CAT_PROFILER, {"stage": cap.meta.get("stage")}) \
            if STATE.tracer is not None else None
        if not cap.failed:
            self.call(cap, "stop", cap.handle.stop)
        files: list[Path] = []
        if not cap.failed:
            try:
                files = cap.handle.export()
            except Exception as exc:
                self._fail(cap, "export", exc)
        deferred = list(cap.handle.deferred or []) if not cap.failed else []
        cap.left = [name for name, _ in deferred]
        held = cap.handle.held if deferred else None
        if held is not None:   # export_after_run: torch's stop and write wait for the session's flush
            cap.meta["status"] = "held"
            cap.left.insert(0, "held")
        elif deferred:
            cap.meta["status"] = "exporting"
        directory = self._finish(cap, files)
        if span is not None:
            self.spans.exit(span)
        STATE.capture_active = bool(session.LIVE_CAPTURES)
        if directory is None:
            return
        self._account(cap, directory)   # now, as written so far (the raw trace: more than it will be)
        if not deferred:
            return
        if held is not None:
            self._hold(cap, held, deferred, directory)
        elif self.cfg.background_export:
            self.exporting.append(cap)
            session.EXPORTING.add(self)
            cap.job, waited = export_writer.WRITER.submit(cap.spec.worker_name,
                                                          lambda: self._complete(cap, files, deferred, directory))
            if waited > 0.001:   # the queue was full: this capture waited for an earlier one's export
                cap.meta["export_phases"]["queue_wait"] = round(waited, 6)
        else:
            self._complete(cap, files, deferred, directory)

    def _hold(self, cap: Capture, held: held_session.HeldSession, deferred: list[tuple[str, Any]],
              directory: Path) -> None:
        """The capture waits in the held session; at its flush, its cut trace goes through the same
        deferred steps (on the writer), or, when the flush could not write it, it fails with the reason."""
        self.exporting.append(cap)
        session.EXPORTING.add(self)

        def complete(files: list[Path], note: str | None, phases: dict[str, float]) -> None:
            cap.meta["export_phases"].update({f"session_{k}": v for k, v in phases.items()})
            if cap.left and cap.left[0] == "held":
                cap.left.pop(0)
            if not files:
                cap.meta["status"] = "failed"
                cap.meta["errors"].append({"phase": "export", "error": note or "not written", "time": fileio.utc_now_iso()})
            elif note:
                cap.meta["notes"].append(note)
            self._complete(cap, files, deferred if files else [], directory)

        held.hold(held_session.HeldWindow(cap.handle.window, cap.handle.raw_path(), complete,
                                          lambda job: setattr(cap, "job", job)))

    def _complete(self, cap: Capture, files: list[Path], deferred: list[tuple[str, Any]], directory: Path) -> None:
        """The deferred export steps in order, then the final metadata. A failed step is a note:
        the files listed stay whole (the raw trace is kept when its compression fails)."""
        phases = cap.meta["export_phases"]
        for name, step in deferred:
            before = files
            try:
                with timed(phases, name):
                    files = step(files)
            except Exception as exc:
                cap.meta["notes"].append(f"export step {name} not done: {type(exc).__name__}: {exc} "
                                         "(the trace files listed are whole)")
            if cap.left and cap.left[0] == name:
                cap.left.pop(0)
            if files != before and cap.left:
                # the files changed (the raw trace compressed, then removed) and a step follows: the
                # metadata lists them now, so a process killed during that step leaves it true
                with self._meta_lock:
                    try:
                        self._write_meta(cap, directory, files)
                    except Exception:
                        pass   # the final write says it, or the warning of a late export
        with self._meta_lock:
            if cap.meta["status"] in ("exporting", "held"):
                cap.meta["status"] = "ok"
            try:
                self._write_meta(cap, directory, files)
            except Exception as exc:   # a full disk: the metadata written at close stays ("exporting")
                self.warn(("meta", type(exc).__name__), "could not write the final capture metadata of %s: %s: %s",
                          cap.spec.worker_name, type(exc).__name__, exc)
            if cap in self.exporting:
                self.exporting.remove(cap)
            if not self.exporting:
                session.EXPORTING.discard(self)
        self._account(cap, directory)

    def wait_exports(self, timeout: float, why: str) -> list[str]:
        """Wait at most `timeout` s for this profiler's background exports; a capture not done by
        then says so in its metadata (status stays "exporting") and in a warning. Returns their
        directory names."""
        caps = list(self.exporting)
        if not caps:
            return []
        export_writer.WRITER.wait([c.job for c in caps if c.job is not None], timeout)
        late: list[str] = []
        with self._meta_lock:
            for cap in caps:
                if cap not in self.exporting:
                    continue
                note = (f"export not finished when {why} (waited {timeout:.1f} s): {', '.join(cap.left) or 'metadata'} "
                        "not written; the trace files listed are whole")
                cap.meta["notes"].append(note)
                directory = cap.meta.get("directory")
                if directory:
                    self._write_meta(cap, Path(directory), [Path(directory) / f for f in cap.meta["trace_files"]])
                late.append(cap.spec.worker_name)
        if late:
            self.warn(("export-late", why), "profiler export of %d capture(s) on %s rank %d not finished when %s "
                      "(waited %.1f s): %s", len(late), self.who.role, self.who.rank, why, timeout, ", ".join(late))
        return late

    def _account(self, cap: Capture, directory: Path) -> None:
        """The process's trace size budget (trace_size_budget_mb): the capture's directory counted
        as it is now (again after its background export, replacing the first count)."""
        if not self.cfg.trace_size_budget_mb:
            return
        size = layout.dir_size(directory)
        self.bytes_written += size - cap.bytes
        cap.bytes = size
        if self.bytes_written > self.cfg.trace_size_budget_mb * 2**20 and not self.budget_exceeded:
            self.budget_exceeded = True
            self.warn(("budget",), "trace size budget of %.1f MB exceeded by %s rank %d (%.1f MB written): further captures are skipped",
                      self.cfg.trace_size_budget_mb, self.who.role, self.who.rank, self.bytes_written / 2**20)

    def _finish(self, cap: Capture, files: list[Path] = ()) -> Path | None:
        """Write the capture's metadata into its directory (made here if the backend made none)."""
        meta = cap.meta
        meta["end_time"] = fileio.utc_now_iso()
        directory = cap.handle.directory if cap.handle is not None else None
        try:
            if directory is None or not Path(directory).is_dir():
                directory = layout.make_capture_dir(cap.spec.save_dir, cap.spec.worker_name, cap.suffix)
            directory = Path(directory)
            if cap.handle is not None:   # (a capture that failed before its backend opened it has none)
                meta["export_phases"].update(cap.handle.phases or {})
            with self._meta_lock:
                self._write_meta(cap, directory, files)
        except Exception as exc:
            self.warn(("meta", type(exc).__name__), "could not write capture metadata for %s rank %d: %s: %s",
                      self.who.role, self.who.rank, type(exc).__name__, exc)
            directory = None
        meta["directory"] = str(directory) if directory is not None else None
        self.finished.append(meta)
        return directory

    def _write_meta(self, cap: Capture, directory: Path, files: list[Path]) -> None:
        """The metadata file as the capture stands (the handle's new notes taken over once)."""
        meta = cap.meta
        meta["trace_files"] = [os.path.relpath(f, directory) for f in files]
        if cap.handle is not None and cap.handle.notes:
            meta["notes"] += list(cap.handle.notes)
            cap.handle.notes = []
        fileio.write_json_atomic(directory / formats.META_FILE, {k: v for k, v in meta.items() if k != "directory"})

    def _backend_naming(self, backend: Backend | None) -> tuple[str, str]:
        """(backend name, capture directory suffix) for the metadata and the directory; when no
        backend could be chosen, those of the configured one (a failed capture still leaves its
        metadata where that backend's capture would be)."""
        if backend is not None:
            return backend.name, backend.suffix
        name = self.cfg.backend
        try:
            return name, backend_class(name).suffix if name != AUTO else _FALLBACK_SUFFIX
        except ValueError:
            return name, _FALLBACK_SUFFIX
