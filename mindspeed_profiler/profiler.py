"""IntegratedProfiler: rank / stage / step gating, capture lifecycle, metadata; never fatal.

    prof = IntegratedProfiler(cfg.integrated, role="actor")
    prof.start()                       # iteration 1 begins
    for it in range(1, iters + 1):
        with prof.stage("actor_update"): ...
        prof.step()                    # iteration `it` ends, `it + 1` begins
    prof.stop()                        # idempotent; also run at interpreter exit

What to capture comes from schedule.py (pure); how, from a backend (backends/); the names and
the metadata from backends/layout.py and docs/formats.md. Any exception from a backend is caught,
logged once, written into the capture's metadata, and that capture is abandoned: training goes on.
"""
from __future__ import annotations

import atexit
import contextlib
import logging
import os
import socket
import sys
import time
import weakref
from pathlib import Path
from typing import Any

from mindspeed_profiler import stages as _stages
from mindspeed_profiler._state import STATE
from mindspeed_profiler.backends import Backend, CaptureHandle, CaptureSpec, layout, select_backend
from mindspeed_profiler.schedule import plan_from_config

log = logging.getLogger("mindspeed_profiler")

__all__ = [
    "IntegratedProfiler",
    "get_profiler",
    "profiler_start",
    "profiler_step",
    "write_run_manifest",
    "resolve_rank",
]

_NULL = contextlib.nullcontext()
# Started, not yet stopped profilers of this process (enabled or tracer-only): colocated roles
# share one process, so the process-wide STATE is derived from all of them (_sync_state).
_RUNNING: "weakref.WeakSet[IntegratedProfiler]" = weakref.WeakSet()
_MANIFESTS_WRITTEN: set[str] = set()
# Captures recording in this process, across all profilers: torch.profiler / torch_npu.profiler
# allow one session per process (a second one steals the first's session, and exporting the first
# then crashes the interpreter), so a capture that would overlap another is not opened.
_LIVE_CAPTURES: "weakref.WeakSet[_Capture]" = weakref.WeakSet()
# The highest `_c<K>` given out per (stage dir, role, rank, first, last) in this process. A profiler
# counts its own stage calls, but two profilers of one name (profiler_start(..., profiler_iteration=N)
# called twice in an iteration builds one per call) would otherwise share a capture name.
_CALLS_USED: dict[tuple[Any, ...], int] = {}


def _claim_call(key: tuple[Any, ...], call: int) -> int:
    """`call`, or the next K not yet used for this capture name in this process."""
    call = max(call, _CALLS_USED.get(key, 0) + 1)
    _CALLS_USED[key] = call
    return call


def _sync_state() -> None:
    """STATE's marker fields from every running enabled profiler, not from the last one started:
    markers are on if any of them wants them (for its rank), with the domains any of them selects;
    the device is theirs; a capture is active if any capture of this process is live."""
    running = [p for p in _RUNNING if p.enabled]
    marking = [p for p in running if p.cfg.mstx and p.rank_selected]
    devices = {p._backend.device for p in running if p._backend is not None}
    STATE.mstx_enabled = bool(marking)
    STATE.device = next((d for d in ("npu", "cuda", "cpu") if d in devices), None)
    STATE.mstx_domain_include, STATE.mstx_domain_exclude = _union_of_domains(marking)
    STATE.capture_active = bool(_LIVE_CAPTURES)


def _union_of_domains(profilers: list["IntegratedProfiler"]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """One (include, exclude) pair selecting a domain when any profiler's pair selects it
    (torch_npu's rule: a non-empty include list wins, else everything not excluded)."""
    pairs = [(tuple(getattr(p.cfg, "mstx_domain_include", ())), tuple(getattr(p.cfg, "mstx_domain_exclude", ())))
             for p in profilers]
    included = {d for inc, _ in pairs for d in inc}
    open_ended = [set(exc) for inc, exc in pairs if not inc]
    if not open_ended:  # every profiler lists what it includes
        return tuple(sorted(included)), ()
    # excluded only where every open-ended profiler excludes it and no profiler includes it
    return (), tuple(sorted(set.intersection(*open_ended) - included))


def _split_config(cfg: Any) -> tuple[Any, Any]:
    """(whole ProfilerConfig or None, IntegratedConfig) from either."""
    if hasattr(cfg, "integrated"):
        return cfg, cfg.integrated
    if hasattr(cfg, "profile") and hasattr(cfg, "rank_selected"):
        return None, cfg
    raise TypeError(f"expected a ProfilerConfig or IntegratedConfig (from load_config), got {type(cfg).__name__}")


def resolve_rank(rank: int | None = None, world_size: int | None = None) -> tuple[int, int, int | None]:
    """(rank, world_size, local_rank): explicit arguments, else torch.distributed when initialised,
    else the RANK / WORLD_SIZE / LOCAL_RANK environment, else (0, 1)."""
    if rank is None or world_size is None:
        d_rank = d_world = None
        dist = sys.modules.get("torch.distributed")
        try:
            if dist is not None and dist.is_available() and dist.is_initialized():
                d_rank, d_world = dist.get_rank(), dist.get_world_size()
        except Exception:
            pass
        if d_rank is None:
            d_rank = _env_int("RANK")
            d_world = _env_int("WORLD_SIZE")
        rank = rank if rank is not None else (d_rank if d_rank is not None else 0)
        world_size = world_size if world_size is not None else (d_world if d_world is not None else max(1, rank + 1))
    return int(rank), int(world_size), _env_int("LOCAL_RANK")


def _env_int(name: str) -> int | None:
    try:
        return int(os.environ[name])
    except (KeyError, ValueError):
        return None


def _versions() -> dict[str, str | None]:
    from importlib import metadata

    out: dict[str, str | None] = {"python": sys.version.split()[0]}
    for dist in ("mindspeed-profiler", "torch", "torch-npu", "ray", "megatron-core"):
        try:
            out[dist] = metadata.version(dist)
        except Exception:
            out[dist] = None
    return out


def _config_dict(full: Any, integ: Any) -> dict[str, Any]:
    if full is not None:
        return full.to_dict()
    from mindspeed_profiler.config import _plain

    return {"profiler_config": {"integrated": _plain(integ)}}


def write_run_manifest(cfg: Any, save_path: str | None = None, *, role: str = "driver", rank: int = 0) -> Path:
    """Write `<profile_save_path>/run.json` (config, versions, start time) atomically."""
    full, integ = _split_config(cfg)
    path = Path(save_path or integ.profile_save_path) / layout.RUN_FILE
    manifest = {
        "schema": 1,
        "config": _config_dict(full, integ),
        "versions": _versions(),
        "start_time": layout.utc_now_iso(),
        "writer": {"role": role, "rank": rank, "host": socket.gethostname(), "pid": os.getpid()},
    }
    return layout.write_json_atomic(path, manifest)


class _Capture:
    """One capture in flight: the backend handle, its spec and its metadata."""

    __slots__ = ("handle", "spec", "meta", "failed", "backend_name", "__weakref__")

    def __init__(self, handle: CaptureHandle | None, spec: CaptureSpec, meta: dict[str, Any], backend_name: str):
        self.handle = handle
        self.spec = spec
        self.meta = meta
        self.failed = False
        self.backend_name = backend_name


class _StageScope:
    """`with prof.stage(name)`: sets STATE.stage, a tracer span, a capture per selected call."""

    __slots__ = ("p", "name", "prev", "span", "cap", "rng")

    def __init__(self, p: "IntegratedProfiler", name: str):
        self.p, self.name = p, name
        self.span = self.cap = self.rng = None

    def __enter__(self) -> "_StageScope":
        p, name = self.p, self.name
        self.prev = STATE.stage
        STATE.stage = name
        p._iter_busy = True
        if p.enabled and p._running:
            if name not in p._known_stages and not _stages.is_stage(name):
                p._warn_once(("stage", name), "stage %r is not registered (register_stage(%r) lets configs select it)", name, name)
            p._known_stages.add(name)
            it = p._iteration
            if p.plan.stage_call_recorded(name, it):
                call = p._stage_calls[name] = p._stage_calls.get(name, 0) + 1
                self.cap = p._open_capture(name, it, it, 0, 0, call)
        # the stage's timeline span opens after the capture started and closes before it is
        # exported, so the timeline shows the stage's own time and the profiler's cost beside it
        if STATE.tracer is not None:
            self.span = p._tracer_enter(name, "stage", {"stage": name, "iteration": p._iteration})
        if p.enabled and p._running and STATE.capture_active:
            self.rng = _record_function(name)
        return self

    def __exit__(self, *exc: Any) -> bool:
        if self.rng is not None:
            with contextlib.suppress(Exception):
                self.rng.__exit__(None, None, None)
        if self.span is not None:
            self.p._tracer_exit(self.span)
        if self.cap is not None:
            self.p._close(self.cap)
        STATE.stage = self.prev
        return False


def _record_function(name: str):
    """A torch record_function range (shows in torch and torch_npu captures), or None."""
    try:
        import torch

        rng = torch.autograd.profiler.record_function(name)
        rng.__enter__()
        return rng
    except Exception:
        return None


class IntegratedProfiler:
    """The per-process profiler of `profiler_config.integrated` (see the module docstring).

    `cfg`: a ProfilerConfig or its `.integrated`. `role`: the worker role ("actor", "integrated", ...),
    used in directory names. `rank` / `world_size`: default from torch.distributed, else the
    RANK / WORLD_SIZE environment. `backend`: a Backend instance overriding `integrated.backend`
    (tests and custom backends).
    """

    def __init__(self, cfg: Any, role: str = "integrated", *, rank: int | None = None,
                 world_size: int | None = None, backend: Backend | None = None):
        full, integ = _split_config(cfg)
        self.cfg = integ
        self.role = layout.check_role(role)
        self.enabled = bool(integ.profile)
        self._running = False
        self._iteration: int | None = None
        self._iter_span = None
        self._iter_busy = False  # a stage ran in the current iteration
        if not self.enabled:
            return  # off means off: nothing built, nothing on disk
        self._full = full
        self.rank, self.world_size, self.local_rank = resolve_rank(rank, world_size)
        self.rank_selected = integ.rank_selected(self.rank)
        self.plan = plan_from_config(integ)
        self._backend = backend
        self._backend_error: BaseException | None = None
        self._open: _Capture | None = None  # the continuous (stage: all) capture
        self._live: set[_Capture] = set()
        self._stage_calls: dict[str, int] = {}
        self._known_stages: set[str] = set()
        self._warned: set[Any] = set()
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

    def start(self, iteration: int = 1) -> None:
        """Iteration `iteration` (1 unless resuming) begins now. Idempotent while running."""
        if self._running:
            return
        if not isinstance(iteration, int) or iteration < 1:
            raise ValueError(f"start(iteration=...): got {iteration!r}; iterations are 1-based integers >= 1")
        self._running = True
        self._iteration = iteration
        STATE.iteration = iteration
        _RUNNING.add(self)
        if self.enabled:
            self._get_backend()
            _sync_state()
            if self.rank == 0:
                self._write_manifest_once()
            if self.plan.continuous:
                w = self.plan.window_resumed_at(iteration)
                if w is not None:
                    self._open = self._open_capture(None, w.first, w.last, w.warmup, w.requested_warmup)
        self._iter_busy = False
        if STATE.tracer is not None:
            self._iter_span = self._tracer_enter("iteration", "iteration", {"iteration": iteration})

    def step(self) -> None:
        """The current iteration ends and the next one begins."""
        if not self._running:
            return
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
        self._iter_busy = False
        if STATE.tracer is not None:
            self._iter_span = self._tracer_enter("iteration", "iteration", {"iteration": self._iteration})

    def stage(self, name: str):
        """Context manager around one call of an RL stage (actor_generate, actor_update, ...)."""
        if not self.enabled and STATE.tracer is None:
            return _NULL
        return _StageScope(self, name)

    def stop(self) -> None:
        """Stop and export any open capture; reset the process state. Idempotent."""
        if not self._running:
            return
        self._running = False
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
        _RUNNING.discard(self)
        if self.enabled:
            _sync_state()  # the other profilers of this process (colocated roles) keep their markers
        if _RUNNING:  # ... and their stage and iteration
            STATE.iteration = max((p._iteration for p in _RUNNING if p._iteration is not None), default=None)
        else:
            STATE.stage = None
            STATE.iteration = None
        self._iteration = None

    def __enter__(self) -> "IntegratedProfiler":
        self.start()
        return self

    def __exit__(self, *exc: Any) -> bool:
        self.stop()
        return False

    # ------------------------------------------------------------------ captures

    def _get_backend(self) -> Backend | None:
        if self._backend is None and self._backend_error is None:
            try:
                self._backend = select_backend(getattr(self.cfg, "backend", "auto"))
            except Exception as exc:
                self._backend_error = exc
                self._warn_once(("backend",), "profiler backend %r unusable on %s rank %d, no captures will be made: %s: %s",
                                getattr(self.cfg, "backend", "auto"), self.role, self.rank, type(exc).__name__, exc)
        return self._backend

    def _parallel_selected(self) -> bool:
        wanted = getattr(self.cfg, "profile_parallel_ranks", None)
        if not wanted:
            return True
        from mindspeed_profiler.integrations.megatron import parallel_layout, parallel_selected

        lay = parallel_layout()
        if lay is None:
            note = "profile_parallel_ranks is set but Megatron's parallel state is not initialised: not filtering by it"
            if note not in self._notes:
                self._notes.append(note)
            self._warn_once(("parallel",), "%s (%s rank %d)", note, self.role, self.rank)
            return True
        return parallel_selected(lay, wanted)

    def _base_meta(self, stage: str | None, first: int, last: int, warmup: int, requested: int, backend_name: str) -> dict[str, Any]:
        from mindspeed_profiler.integrations.megatron import parallel_layout

        return {
            "schema": 1,
            "role": self.role,
            "stage": stage or layout.ALL_DIR,
            "rank": self.rank,
            "world_size": self.world_size,
            "local_rank": self.local_rank,
            "parallel": parallel_layout(),
            "steps": [first, last],
            "warmup_steps": warmup,
            "requested_warmup_steps": requested,
            "profiled_iterations": [first - warmup, last],
            "backend": backend_name,
            "device": self._backend.device if self._backend is not None else None,
            "level": self.cfg.profile_level,
            "export_type": self.cfg.profile_export_type,
            "mstx": bool(self.cfg.mstx),
            "host": self.host,
            "pid": os.getpid(),
            "clock": {"wall_ns": time.time_ns(), "mono_ns": time.monotonic_ns()},
            "start_time": layout.utc_now_iso(),
            "end_time": None,
            "status": "ok",
            "errors": [],
            "trace_files": [],
            "options": None,
            "notes": list(self._notes),
        }

    def _open_capture(self, stage: str | None, first: int, last: int, warmup: int, requested: int, call: int = 1) -> _Capture | None:
        if not self.rank_selected or not self._parallel_selected():
            return None
        backend = self._get_backend()
        backend_name = backend.name if backend is not None else ("npu" if self.cfg.backend == "npu" else "torch")
        save_dir = str(layout.stage_dir(self.cfg.profile_save_path, stage))
        call = _claim_call((os.path.abspath(save_dir), self.role, self.rank, first, last), call)
        spec = CaptureSpec(
            save_dir=save_dir,
            worker_name=layout.worker_name(self.role, self.rank, first, last, call, self.host),
            trace_basename=layout.trace_basename(self.role, self.rank),
            first=first, last=last, warmup=warmup, cfg=self.cfg,
        )
        meta = self._base_meta(stage, first, last, warmup, requested, backend_name)
        cap = _Capture(None, spec, meta, backend_name)
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
        busy = [c for c in _LIVE_CAPTURES if c.handle is not None]
        if busy:
            # nested selected stages, or two profilers of one process capturing at once
            what = f"{stage or layout.ALL_DIR} (steps {first}-{last}, call {call})"
            for other in busy:
                note = f"{self.role} {what} ran inside this capture: not captured separately (one profiler session per process)"
                if note not in other.meta["notes"]:
                    other.meta["notes"].append(note)
            self._warn_once(("overlap", stage), "profiler capture of %s on %s rank %d not started: another capture (%s) is "
                            "recording in this process, and torch / torch_npu allow one at a time; it shows inside that one",
                            what, self.role, self.rank, busy[0].spec.worker_name)
            return None
        try:
            meta["options"] = backend.options(self.cfg)
            cap.handle = backend.open(spec)
        except Exception as exc:
            self._fail(cap, "start", exc)
            self._finish(cap)
            return None
        self._live.add(cap)
        _LIVE_CAPTURES.add(cap)
        if self._call(cap, "start", cap.handle.start):
            STATE.capture_active = True
            return cap
        self._close(cap)
        return None

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
        cap.meta["errors"].append({"phase": phase, "error": f"{type(exc).__name__}: {exc}", "time": layout.utc_now_iso()})
        self._warn_once((phase, type(exc).__name__),
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
        _LIVE_CAPTURES.discard(cap)
        # the export can take seconds: show it on the timeline as the profiler's own span
        span = self._tracer_enter("profiler_export", "profiler", {"stage": cap.meta.get("stage")}) \
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
        STATE.capture_active = bool(_LIVE_CAPTURES)
        if directory is not None and self.cfg.trace_size_budget_mb:
            self._bytes_written += layout.dir_size(directory)
            if self._bytes_written > self.cfg.trace_size_budget_mb * 2**20:
                self._budget_exceeded = True
                self._warn_once(("budget",), "trace size budget of %.1f MB exceeded by %s rank %d (%.1f MB written): further captures are skipped",
                                self.cfg.trace_size_budget_mb, self.role, self.rank, self._bytes_written / 2**20)

    def _finish(self, cap: _Capture, files: list[Path] = ()) -> Path | None:
        """Write the capture's metadata into its directory (made here if the backend made none)."""
        meta = cap.meta
        meta["end_time"] = layout.utc_now_iso()
        directory = cap.handle.directory if cap.handle is not None else None
        try:
            if directory is None or not Path(directory).is_dir():
                directory = layout.make_capture_dir(cap.spec.save_dir, cap.spec.worker_name, cap.backend_name)
            directory = Path(directory)
            meta["trace_files"] = [os.path.relpath(f, directory) for f in files]
            layout.write_json_atomic(directory / layout.META_FILE, meta)
        except Exception as exc:
            self._warn_once(("meta", type(exc).__name__), "could not write capture metadata for %s rank %d: %s: %s",
                            self.role, self.rank, type(exc).__name__, exc)
            directory = None
        meta["directory"] = str(directory) if directory is not None else None
        self.captures.append(meta)
        return directory

    # ------------------------------------------------------------------ helpers

    def _write_manifest_once(self) -> None:
        key = os.path.abspath(self.cfg.profile_save_path)
        if key in _MANIFESTS_WRITTEN:
            return
        _MANIFESTS_WRITTEN.add(key)
        try:
            write_run_manifest(self._full or self.cfg, role=self.role, rank=self.rank)
        except Exception as exc:
            self._warn_once(("manifest",), "could not write run.json under %s: %s: %s", key, type(exc).__name__, exc)

    def _warn_once(self, key: Any, msg: str, *args: Any) -> None:
        warned = getattr(self, "_warned", None)
        if warned is None:
            warned = self._warned = set()
        if key not in warned:
            warned.add(key)
            log.warning(msg, *args)

    def _tracer_enter(self, name: str, cat: str, args: dict[str, Any]):
        try:
            from mindspeed_profiler.tracing import trace_span

            span = trace_span(name, cat=cat, args={"role": self.role, **args})
            span.__enter__()
            return span
        except Exception as exc:
            self._warn_once(("tracer", type(exc).__name__), "tracer span %r failed: %s: %s", name, type(exc).__name__, exc)
            return None

    def _tracer_exit(self, span: Any) -> None:
        try:
            span.__exit__(None, None, None)
        except Exception as exc:
            self._warn_once(("tracer-exit", type(exc).__name__), "tracer span end failed: %s: %s", type(exc).__name__, exc)


@atexit.register
def _stop_all_at_exit() -> None:
    """Export whatever is still open when the interpreter exits."""
    for prof in list(_RUNNING):
        try:
            prof.stop()
        except Exception:
            pass


# ---------------------------------------------------------------------- MindSpeed-style functions


class _StageShot:
    """What `profiler_start(cfg, stage, profiler_iteration=N)` returns: one capture of one stage
    call; `step()` (or `stop()`) ends it."""

    def __init__(self, prof: IntegratedProfiler, stage: str, iteration: int):
        self.profiler = prof
        prof.start(iteration=iteration)
        self._scope: _StageScope | None = _StageScope(prof, stage)
        self._scope.__enter__()

    def step(self) -> None:
        if self._scope is not None:
            scope, self._scope = self._scope, None
            scope.__exit__(None, None, None)
            self.profiler.stop()

    stop = step


def get_profiler(cfg: Any, role: str = "integrated", **kwargs: Any) -> IntegratedProfiler:
    """MindSpeed-style: build (not start) the profiler for `role`."""
    return IntegratedProfiler(cfg, role, **kwargs)


def profiler_start(cfg: Any, role: str = "integrated", profiler_iteration: int | None = None, **kwargs: Any):
    """MindSpeed-style start. Without `profiler_iteration`: start the role's profiler (None when
    profiling is off). With it: `role` names a stage, and when the config selects that stage and
    iteration, one capture of this call starts now (profiler_step ends it); else None."""
    _, integ = _split_config(cfg)
    if not integ.profile:
        return None
    if profiler_iteration is None:
        prof = IntegratedProfiler(cfg, role, **kwargs)
        prof.start()
        return prof
    if integ.stages is None or not integ.stage_selected(role) or profiler_iteration not in integ.steps:
        return None
    worker_role = kwargs.pop("worker_role", role)
    return _StageShot(IntegratedProfiler(cfg, worker_role, **kwargs), role, profiler_iteration)


def profiler_step(profiler: Any) -> None:
    """MindSpeed-style step: no-op on None."""
    if profiler is not None:
        profiler.step()
