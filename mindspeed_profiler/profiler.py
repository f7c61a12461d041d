"""IntegratedProfiler: rank / stage / step gating and the capture lifecycle; never fatal.

    prof = IntegratedProfiler(cfg, role="actor")
    prof.set_model(model)              # optional: the model's size, for MFU (metrics/)
    prof.start()                       # iteration 1 begins
    for it in range(1, iters + 1):
        with prof.stage("actor_update"): ...
        prof.step(tokens=n, samples=b) # iteration `it` ends (and did this much), `it + 1` begins
        prof.metrics()                 # that iteration's timings, tokens/s, MFU (metrics.enable)
    prof.stop()                        # idempotent; also run at interpreter exit

What to capture comes from schedule.py (pure); how, from a backend (backends/, chosen through its
registry); names from formats.py / backends/layout.py; the metadata and run.json from
manifest.py; what the profilers of one process share (live captures, marker state) from
session.py. Any exception from a backend is caught, logged once, written into the capture's
metadata, and that capture is abandoned: training goes on.

With `profiler_config.metrics.enable` (and the whole ProfilerConfig given, not its `.integrated`)
the profiler adds the metrics tracker (metrics/tracker.py) to its observers: one JSON line per
iteration, also when `integrated.profile` is false.

The MindSpeed-RL-style functions (get_profiler, profiler_start, profiler_step) live in
mindspeed_api.py and are importable from here too.
"""
from __future__ import annotations

import contextlib
import os
import socket
import time
from pathlib import Path
from typing import Any

from mindspeed_profiler import fileio, formats, observers
from mindspeed_profiler import session
from mindspeed_profiler import stages as _stages
from mindspeed_profiler._state import STATE
from mindspeed_profiler._warn import new_scope, warn_once
from mindspeed_profiler.backends import Backend, CaptureHandle, CaptureSpec, layout, select_backend
from mindspeed_profiler.backends.honour import capture_options
from mindspeed_profiler.backends.registry import AUTO, backend_class
from mindspeed_profiler.manifest import capture_metadata, resolve_run_id, split_config, write_run_manifest
from mindspeed_profiler.metrics.counts import check_step_counts
from mindspeed_profiler.ranks import resolve_rank
from mindspeed_profiler.schedule import plan_from_config
from mindspeed_profiler.signals import install_sigterm_handler
from mindspeed_profiler.stage_scope import StageScope

__all__ = [
    "IntegratedProfiler",
    "write_run_manifest",
    "resolve_rank",
]

_NULL = contextlib.nullcontext()
DEFAULT_ROLE = "integrated"
# the suffix of a failed capture's (metadata-only) directory when no backend could be chosen
_FALLBACK_SUFFIX = "pt"


class _Capture:
    """One capture in flight: the backend handle, its spec and its metadata."""

    __slots__ = ("handle", "spec", "meta", "failed", "backend_name", "suffix", "__weakref__")

    def __init__(self, handle: CaptureHandle | None, spec: CaptureSpec, meta: dict[str, Any], backend_name: str,
                 suffix: str):
        self.handle = handle
        self.spec = spec
        self.meta = meta
        self.failed = False
        self.backend_name = backend_name
        self.suffix = suffix


def _tracer_role() -> str | None:
    """The role this process's tracer runs under, when it is usable in directory names."""
    rec = STATE.tracer
    return rec.role if rec is not None and formats.ROLE_RE.match(rec.role) else None


def _lightweight_if_asked(cfg: Any, backend: Backend) -> Backend:
    """level_none on a backend that cannot record annotations alone (torch records every op to see
    them): record them ourselves instead of opening its session (backends/markers.py)."""
    if cfg.profile_level == "level_none" and not backend.annotation_only_mode:
        from mindspeed_profiler.backends.markers import MarkersBackend

        return MarkersBackend(device=backend.device)
    return backend


class IntegratedProfiler:
    """The per-process profiler of `profiler_config.integrated` (see the module docstring).

    `cfg`: a ProfilerConfig or its `.integrated`. `role`: the worker role ("actor", ...), used in
    directory names; default: the role of this process's tracer when one runs, else "integrated". `rank` / `world_size`: default from torch.distributed, else the
    RANK / WORLD_SIZE environment. `backend`: a Backend instance overriding `integrated.backend`
    (tests and custom backends). `iteration_spans`: False for a profiler that wraps one stage call
    (its iterations are the worker's). `request_id`: the on-demand request this profiler's capture
    answers (the listener's child; it writes no spans and no run.json of its own).

    `observers`: this profiler's own observers (observers.py: started / stage / step / stopped),
    the on-demand listener and the metrics tracker among them; add_observer() adds one.
    """

    def __init__(self, cfg: Any, role: str | None = None, *, rank: int | None = None,
                 world_size: int | None = None, backend: Backend | None = None, iteration_spans: bool = True,
                 request_id: str | None = None):
        full, integ = split_config(cfg)
        self.cfg = integ
        # False for a profiler that only wraps one stage call (MindSpeed-style profiler_start): the
        # worker's iterations are not its to mark on the timeline
        self._iteration_spans = iteration_spans
        # one name per process: by default the tracer's, when this process runs one
        self.role = layout.check_role(role or _tracer_role() or DEFAULT_ROLE)
        self.enabled = bool(integ.profile)
        self._running = False
        self._iteration: int | None = None
        self._iter_span = None
        self._iter_busy = False  # a stage ran in the current iteration
        # an on-demand capture's profiler (it answers request `request_id`) follows its listener's
        # owner: no spans or run.json of its own
        self._request_id = request_id
        self.observers: list[Any] = []
        self._ondemand = None   # the listener (also in self.observers), for introspection
        self.model_size = None  # metrics.ModelSize, from set_model()
        self._step_counts: dict[str, int] = {}   # what the iteration ending at this step() did
        self._iter_began: float | None = None    # perf_counter() when the current iteration began
        self._iter_ended: float | None = None    # ... and when the last one ended
        self._metrics = None    # the metrics tracker (also in self.observers)
        mcfg = getattr(full, "metrics", None)
        if mcfg is not None and mcfg.enable and iteration_spans and request_id is None:
            from mindspeed_profiler.metrics.tracker import MetricsTracker

            self._metrics = MetricsTracker(self, full, rank, world_size)
            self.observers.append(self._metrics)
        if getattr(integ, "dynamic", False) and iteration_spans:
            from mindspeed_profiler.ondemand.listener import make_listener

            self._ondemand = make_listener(self, full, integ, rank, world_size)
            if self._ondemand is not None:
                self.observers.append(self._ondemand)
        if not self.enabled:
            return  # off means off: nothing built, nothing on disk (a listener waits for requests)
        self._full = full
        self.run_id, _ = resolve_run_id(full)
        self.rank, self.world_size, self.local_rank = resolve_rank(rank, world_size)
        self.rank_selected = integ.rank_selected(self.rank, self.role)
        if integ.role_ranks is not None and self.role not in integ.role_ranks:
            warn_once(("role_ranks", self.role), "role %r is not in integrated.role_ranks (%s): its profiler captures nothing",
                      self.role, ", ".join(integ.role_ranks))
        for name in integ.register_stages:  # the config's own stages are known in this process too
            _stages.register_stage(name, owner="config")
        self.plan = plan_from_config(integ)
        self.backend = backend  # chosen through the registry at start() unless given
        self._backend_error: BaseException | None = None
        self._open: _Capture | None = None  # the continuous (stage: all) capture
        self._live: set[_Capture] = set()
        self._stage_calls: dict[str, int] = {}
        self._known_stages: set[str] = set()
        self._warn_scope = new_scope()
        self._bytes_written = 0
        self._budget_exceeded = False
        self._notes: list[str] = []
        self.captures: list[dict[str, Any]] = []  # metadata of every finished capture, in order
        self.host = socket.gethostname()

    # ------------------------------------------------------------------ public lifecycle

    @property
    def iteration(self) -> int | None:
        """The current 1-based iteration (None before start() / after stop())."""
        return self._iteration

    @property
    def step_counts(self) -> dict[str, int]:
        """What the iteration that is ending did, as given to step() (tokens, samples, ...): for
        observers, during their `step` call."""
        return self._step_counts

    @property
    def iteration_window(self) -> tuple[float | None, float | None]:
        """(began, ended), time.perf_counter() seconds, of the iteration that is ending: for
        observers, during their `step` / `stopped` call (the moments its timeline span opens and
        closes)."""
        return self._iter_began, self._iter_ended

    def metrics(self) -> dict[str, Any]:
        """The last completed iteration's metrics (docs/metrics.md: `timing_s/<stage>`,
        `perf/throughput`, `perf/mfu/<stage>`, ...), for a logger of your own; {} before the first,
        or when `metrics.enable` is false."""
        return dict(self._metrics.last) if self._metrics is not None else {}

    def set_model(self, model_or_config: Any = None, *, parameters: int | None = None, layers: int | None = None,
                  hidden: int | None = None, ffn_hidden: int | None = None, vocab: int | None = None,
                  heads: int | None = None) -> Any:
        """The model's size, for MFU (metrics/model_size.py). `model_or_config`: a Megatron-core
        model or TransformerConfig (Megatron's parameter formula), any torch.nn.Module (the sum of
        its parameters' numel) or a metrics.ModelSize. Or no object: `parameters=N`, or the shape
        (`layers`, `hidden`, `heads`, optionally `ffn_hidden`, `vocab`) for the formula. A keyword
        given with an object overrides what the object says. `metrics.parameters` in the config wins
        over all of it. Returns the ModelSize."""
        from mindspeed_profiler.metrics.model_size import size_of

        size = size_of(model_or_config, parameters=parameters, layers=layers, hidden=hidden, ffn_hidden=ffn_hidden,
                       vocab=vocab, heads=heads)
        self.model_size = size
        return size

    def add_observer(self, observer: Any) -> None:
        """Follow this profiler's iterations and stages (observers.py); once per observer."""
        if observer not in self.observers:
            self.observers.append(observer)

    def start(self, iteration: int = 1) -> None:
        """Iteration `iteration` (1 unless resuming) begins now. Idempotent while running."""
        if self._running:
            return
        if not isinstance(iteration, int) or iteration < 1:
            raise ValueError(f"start(iteration=...): got {iteration!r}; iterations are 1-based integers >= 1")
        self._running = True
        self._iteration = iteration
        STATE.iteration = iteration
        session.RUNNING.add(self)
        session.follow_system_capture()   # a wrapped worker's follower, subscribed at the first start
        if observers.ITERATION_LISTENERS: observers.notify(observers.ITERATION_LISTENERS, "started", self, iteration)  # noqa: E701
        if self.enabled:
            install_sigterm_handler(session.stop_all, order=0)   # a SIGTERM exports the open capture first
            self._get_backend()
            session.sync_state()
            if self.rank == 0:
                self._write_manifest_once()
            if self.plan.continuous:
                w = self.plan.window_resumed_at(iteration)
                if w is not None:
                    self._open = self._open_capture(None, w.first, w.last, w.warmup, w.requested_warmup)
        self._iter_busy = False
        if self.observers: observers.notify(self.observers, "started", self, iteration)  # noqa: E701
        self._iter_began = time.perf_counter()
        if STATE.tracer is not None and self._iteration_spans:
            self._iter_span = self._tracer_enter(formats.SPAN_ITERATION, formats.CAT_ITERATION, {"iteration": iteration})

    def step(self, tokens: int | None = None, samples: int | None = None, **counts: int) -> None:
        """The current iteration ends and the next one begins. `tokens`, `samples` and `counts`
        (prompt_tokens=, response_tokens=, any name): what the ending iteration did, for the metrics
        (docs/metrics.md); each a non-negative int, else ValueError."""
        given = check_step_counts(tokens, samples, counts) if tokens is not None or samples is not None or counts else {}
        if not self._running:
            return
        if observers.ITERATION_LISTENERS: observers.notify(observers.ITERATION_LISTENERS, "step", self, self._iteration + 1)  # noqa: E701
        self._iter_ended = time.perf_counter()
        self._step_counts = given
        if self._iter_span is not None:
            span, self._iter_span = self._iter_span, None
            self._tracer_exit(span)
        if self.enabled:
            cap = self._open
            if cap is not None:
                if not cap.failed:
                    self._call(cap, "step", cap.handle.step)
                if cap.failed or self._iteration >= cap.spec.last:
                    self._open = None
                    self._close(cap)
            self._stage_calls = {}
        self._iteration += 1
        STATE.iteration = self._iteration
        if self.enabled and self._open is None and self.plan.continuous:
            w = self.plan.window_beginning_at(self._iteration)
            if w is not None:
                self._open = self._open_capture(None, w.first, w.last, w.warmup, w.requested_warmup)
        if self.observers: observers.notify(self.observers, "step", self, self._iteration)  # noqa: E701
        self._iter_busy = False
        self._step_counts = {}
        self._iter_began = time.perf_counter()
        if STATE.tracer is not None and self._iteration_spans:
            self._iter_span = self._tracer_enter(formats.SPAN_ITERATION, formats.CAT_ITERATION, {"iteration": self._iteration})

    def stage(self, name: str):
        """Context manager around one call of an RL stage (actor_generate, actor_update, ...)."""
        if not self.enabled and STATE.tracer is None and not self.observers and not observers.ITERATION_LISTENERS:
            return _NULL
        return StageScope(self, name)

    def stop(self) -> None:
        """Stop and export any open capture; reset the process state. Idempotent."""
        if not self._running:
            return
        self._running = False
        if observers.ITERATION_LISTENERS: observers.notify(observers.ITERATION_LISTENERS, "stopped", self, self._iteration)  # noqa: E701
        self._iter_ended = time.perf_counter()
        self._step_counts = {}
        if self.observers:  # before this profiler's captures close (a running on-demand capture exports what it recorded)
            observers.notify(self.observers, "stopped", self, self._iteration)
        if self._iter_span is not None:
            span, self._iter_span = self._iter_span, None
            # the last step() conventionally ends the last iteration: the one it began is
            # emitted only if a stage ran in it
            if not self._iter_busy and hasattr(span, "done"):
                span.done = True  # the tracer's Span drops a span marked done
            self._tracer_exit(span)
        if self.enabled:
            self._open = None
            for cap in sorted(self._live, key=lambda c: c.spec.first):
                if self._iteration < cap.spec.last:
                    cap.meta["notes"].append(f"stopped early: iterations {cap.spec.first}-{self._iteration} recorded "
                                             f"(iteration {self._iteration} possibly in part)")
                    cap.meta["planned_steps"] = [cap.spec.first, cap.spec.last]
                    if self._iteration >= cap.spec.first:  # `steps` says what was recorded, not what was planned
                        cap.meta["steps"] = [cap.spec.first, self._iteration]
                        cap.meta["profiled_iterations"] = [cap.meta["profiled_iterations"][0], self._iteration]
                self._close(cap)
        session.RUNNING.discard(self)
        self._iteration = None
        if self.enabled:
            session.sync_state()  # the other profilers of this process (colocated roles) keep their markers
        session.sync_iteration()  # ... and their stage and iteration

    def forget_after_fork(self) -> None:
        """In a process forked from the one running this profiler (session.py): its captures and
        iterations are the parent's, never stepped, exported or stopped here; the listener's
        polling thread did not survive the fork."""
        self._running = False
        if self._ondemand is not None:
            self.observers = [o for o in self.observers if o is not self._ondemand]
            self._ondemand = None

    def __enter__(self) -> "IntegratedProfiler":
        self.start()
        return self

    def __exit__(self, *exc: Any) -> bool:
        self.stop()
        return False

    # ------------------------------------------------------------------ captures

    def _get_backend(self) -> Backend | None:
        if self.backend is None and self._backend_error is None:
            try:
                self.backend = _lightweight_if_asked(self.cfg, select_backend(self.cfg.backend))
            except Exception as exc:
                self._backend_error = exc
                self._warn(("backend",), "profiler backend %r unusable on %s rank %d, no captures will be made: %s: %s",
                           self.cfg.backend, self.role, self.rank, type(exc).__name__, exc)
        return self.backend

    def _parallel_selected(self) -> bool:
        wanted = self.cfg.profile_parallel_ranks
        if not wanted:
            return True
        from mindspeed_profiler.integrations.megatron import parallel_layout, parallel_selected

        lay = parallel_layout()
        if lay is None:
            note = "profile_parallel_ranks is set but Megatron's parallel state is not initialised: not filtering by it"
            if note not in self._notes:
                self._notes.append(note)
            self._warn(("parallel",), "%s (%s rank %d)", note, self.role, self.rank)
            return True
        return parallel_selected(lay, wanted)

    def _open_capture(self, stage: str | None, first: int, last: int, warmup: int, requested: int, call: int = 1) -> _Capture | None:
        if not self.rank_selected or not self._parallel_selected():
            return None
        backend = self._get_backend()
        backend_name, suffix = self._backend_naming(backend)
        save_dir = str(layout.stage_dir(self.cfg.profile_save_path, stage))
        call = session.claim_call((os.path.abspath(save_dir), self.role, self.rank, first, last), call)
        spec = CaptureSpec(
            save_dir=save_dir,
            worker_name=layout.worker_name(self.role, self.rank, first, last, call, self.host),
            trace_basename=layout.trace_basename(self.role, self.rank),
            first=first, last=last, warmup=warmup, cfg=self.cfg,
        )
        meta = capture_metadata(self.cfg, run_id=self.run_id, role=self.role, stage=stage, rank=self.rank, world_size=self.world_size,
                                local_rank=self.local_rank, first=first, last=last, warmup=warmup,
                                requested_warmup=requested, backend=backend_name,
                                device=backend.device if backend is not None else None, host=self.host,
                                notes=self._notes)
        if self._request_id is not None:
            meta["request_id"] = self._request_id  # an on-demand capture: the request it answers
        cap = _Capture(None, spec, meta, backend_name, suffix)
        if self._budget_exceeded:
            meta["status"] = "skipped"
            meta["notes"].append(f"trace_size_budget_mb={self.cfg.trace_size_budget_mb} exceeded "
                                 f"({self._bytes_written / 2**20:.1f} MB written by this process)")
            self._finish(cap)
            return None
        if backend is None:
            self._record_error(cap, "start", self._backend_error or RuntimeError("no backend"))
            self._finish(cap)
            return None
        busy = [c for c in session.LIVE_CAPTURES if c.handle is not None]
        if busy:
            # nested selected stages, or two profilers of one process capturing at once
            what = f"{stage or formats.ALL_DIR} (steps {first}-{last}, call {call})"
            for other in busy:
                note = f"{self.role} {what} ran inside this capture: not captured separately (one profiler session per process)"
                if note not in other.meta["notes"]:
                    other.meta["notes"].append(note)
            self._warn(("overlap", stage), "profiler capture of %s on %s rank %d not started: another capture (%s) is "
                       "recording in this process, and torch / torch_npu allow one at a time; it shows inside that one",
                       what, self.role, self.rank, busy[0].spec.worker_name)
            return None
        try:
            # the backend's options, noting what of the config it does not honour (backends/honour.py)
            meta["options"] = capture_options(backend, self.cfg)
            cap.handle = backend.open(spec)
        except Exception as exc:
            self._fail(cap, "start", exc)
            self._finish(cap)
            return None
        self._live.add(cap)
        session.LIVE_CAPTURES.add(cap)
        if self._call(cap, "start", cap.handle.start):
            STATE.capture_active = True
            self._write_recording_meta(cap)
            return cap
        self._close(cap)
        return None

    def _write_recording_meta(self, cap: _Capture) -> None:
        """The metadata, status "recording", as soon as the capture directory exists: a worker
        killed mid-capture leaves a capture the analysis can say was never finished."""
        directory = cap.handle.directory
        if directory is None or not Path(directory).is_dir():
            return
        try:
            fileio.write_json_atomic(Path(directory) / formats.META_FILE, {**cap.meta, "status": "recording"})
        except Exception:
            pass   # the final metadata is written at the end anyway

    def _call(self, cap: _Capture, phase: str, fn) -> bool:
        try:
            fn()
            return True
        except Exception as exc:
            self._fail(cap, phase, exc)
            return False

    def _record_error(self, cap: _Capture, phase: str, exc: BaseException) -> None:
        cap.failed = True
        cap.meta["status"] = "failed"
        cap.meta["errors"].append({"phase": phase, "error": f"{type(exc).__name__}: {exc}", "time": fileio.utc_now_iso()})
        self._warn((phase, type(exc).__name__),
                   "profiler %s failed (%s rank %d, stage %s, steps %d-%d, backend %s); capture abandoned, training goes on: %s: %s",
                   phase, self.role, self.rank, cap.meta["stage"], cap.spec.first, cap.spec.last,
                   cap.backend_name, type(exc).__name__, exc)

    def _fail(self, cap: _Capture, phase: str, exc: BaseException) -> None:
        self._record_error(cap, phase, exc)
        if cap.handle is not None:
            cap.handle.abandon()

    def _close(self, cap: _Capture) -> None:
        """Stop, export, write the metadata. Never raises."""
        if cap not in self._live:
            return
        self._live.discard(cap)
        session.LIVE_CAPTURES.discard(cap)
        # the export can take seconds: show it on the timeline as the profiler's own span
        span = self._tracer_enter(formats.SPAN_PROFILER_EXPORT, formats.CAT_PROFILER, {"stage": cap.meta.get("stage")}) \
            if STATE.tracer is not None else None
        if not cap.failed:
            self._call(cap, "stop", cap.handle.stop)
        files: list[Path] = []
        if not cap.failed:
            try:
                files = cap.handle.export()
            except Exception as exc:
                self._fail(cap, "export", exc)
        directory = self._finish(cap, files)
        if span is not None:
            self._tracer_exit(span)
        STATE.capture_active = bool(session.LIVE_CAPTURES)
        if directory is not None and self.cfg.trace_size_budget_mb:
            self._bytes_written += layout.dir_size(directory)
            if self._bytes_written > self.cfg.trace_size_budget_mb * 2**20:
                self._budget_exceeded = True
                self._warn(("budget",), "trace size budget of %.1f MB exceeded by %s rank %d (%.1f MB written): further captures are skipped",
                           self.cfg.trace_size_budget_mb, self.role, self.rank, self._bytes_written / 2**20)

    def _finish(self, cap: _Capture, files: list[Path] = ()) -> Path | None:
        """Write the capture's metadata into its directory (made here if the backend made none)."""
        meta = cap.meta
        meta["end_time"] = fileio.utc_now_iso()
        directory = cap.handle.directory if cap.handle is not None else None
        try:
            if directory is None or not Path(directory).is_dir():
                directory = layout.make_capture_dir(cap.spec.save_dir, cap.spec.worker_name, cap.suffix)
            directory = Path(directory)
            meta["trace_files"] = [os.path.relpath(f, directory) for f in files]
            meta["notes"] += list(getattr(cap.handle, "notes", None) or [])
            fileio.write_json_atomic(directory / formats.META_FILE, meta)
        except Exception as exc:
            self._warn(("meta", type(exc).__name__), "could not write capture metadata for %s rank %d: %s: %s",
                       self.role, self.rank, type(exc).__name__, exc)
            directory = None
        meta["directory"] = str(directory) if directory is not None else None
        self.captures.append(meta)
        return directory

    # ------------------------------------------------------------------ helpers

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

    def _write_manifest_once(self) -> None:
        key = os.path.abspath(self.cfg.profile_save_path)
        if key in session.MANIFESTS_WRITTEN or self._request_id is not None:
            return
        session.MANIFESTS_WRITTEN.add(key)
        try:
            write_run_manifest(self._full or self.cfg, role=self.role, rank=self.rank)
        except Exception as exc:
            self._warn(("manifest",), "could not write run.json under %s: %s: %s", key, type(exc).__name__, exc)

    def _warn(self, key: tuple[Any, ...], msg: str, *args: Any) -> None:
        """Once per profiler (two colocated profilers each report their own failure)."""
        warn_once((getattr(self, "_warn_scope", 0),) + key, msg, *args)

    def _tracer_enter(self, name: str, cat: str, args: dict[str, Any]):
        """A span on this process's timeline. The process is named once, by the tracer (its segment
        header's role and rank, which the merge puts on every span): the profiler adds no name of
        its own, and says once when the two were given different roles."""
        try:
            from mindspeed_profiler.tracing import trace_span

            rec = STATE.tracer
            if rec is not None and rec.role != self.role:
                self._warn(("identity", rec.role), "this process is %r to the tracer and %r to the profiler: the timeline "
                           "names it %s:%s (give init_tracer and the profiler the same role)", rec.role, self.role,
                           rec.role, rec.rank)
            span = trace_span(name, cat=cat, args=args)
            span.__enter__()
            return span
        except Exception as exc:
            self._warn(("tracer", type(exc).__name__), "tracer span %r failed: %s: %s", name, type(exc).__name__, exc)
            return None

    def _tracer_exit(self, span: Any) -> None:
        try:
            span.__exit__(None, None, None)
        except Exception as exc:
            self._warn(("tracer-exit", type(exc).__name__), "tracer span end failed: %s: %s", type(exc).__name__, exc)


