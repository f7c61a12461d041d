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
from typing import Any, ContextManager

from mindspeed_profiler.core import formats
from mindspeed_profiler.capture import observers
from mindspeed_profiler.runtime import session
from mindspeed_profiler.capture import stages as _stages
from mindspeed_profiler.core.state import STATE
from mindspeed_profiler.core.warn import warn_once
from mindspeed_profiler.backends import Backend, layout
from mindspeed_profiler.runtime.manifest import resolve_run_id, split_config, write_run_manifest
from mindspeed_profiler.metrics.counts import check_step_counts
from mindspeed_profiler.runtime.ranks import resolve_rank
from mindspeed_profiler.runtime import boundary
from mindspeed_profiler.runtime.captures import Captures, Identity
from mindspeed_profiler.runtime.spans import ScopedWarn, Spans
from mindspeed_profiler.capture.schedule import Plan, plan_from_config
from mindspeed_profiler.runtime.signals import install_sigterm_handler
from mindspeed_profiler.runtime.stage_scope import StageScope

__all__ = [
    "IntegratedProfiler",
    "write_run_manifest",
    "resolve_rank",
]

_NULL = contextlib.nullcontext()
DEFAULT_ROLE = "integrated"


def _tracer_role() -> str | None:
    """The role this process's tracer runs under, when it is usable in directory names."""
    rec = STATE.tracer
    return rec.role if rec is not None and formats.ROLE_RE.match(rec.role) else None


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

    What happens at start / step / stop, in which order, is runtime/boundary.py's table; the
    captures themselves are runtime/captures.py's (`capturing`, None while `profile` is false).
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
        self.running = False  # between start() and stop()
        self._iteration: int | None = None
        self._iter_span = None
        self.iteration_busy = False  # a stage ran in the current iteration (the stage scope sets it)
        # an on-demand capture's profiler (it answers request `request_id`) follows its listener's
        # owner: no spans or run.json of its own
        self.request_id = request_id
        self.observers: list[Any] = []
        self._ondemand = None   # the listener (also in self.observers), for introspection
        self.model_size = None  # metrics.ModelSize, from set_model()
        self._step_counts: dict[str, int] = {}   # what the iteration ending at this step() did
        self._given_counts: dict[str, int] = {}  # ... as step() was given them, until then
        self._iter_began: float | None = None    # perf_counter() when the current iteration began
        self._iter_ended: float | None = None    # ... and when the last one ended
        self._metrics = None    # the metrics tracker (also in self.observers)
        self._warn = ScopedWarn()
        self.spans = Spans(self.role, self._warn)
        # what only an enabled profiler resolves; off means off: nothing built, nothing on disk
        self._full = full
        self.run_id: str | None = None
        self.rank, self.world_size, self.local_rank = rank, world_size, None
        self.rank_selected = False
        self.plan: Plan | None = None
        self.host: str | None = None
        self.capturing: Captures | None = None
        self.captures: list[dict[str, Any]] = []  # metadata of every finished capture, in order
        mcfg = getattr(full, "metrics", None)
        if mcfg is not None and mcfg.enable and iteration_spans and request_id is None:
            from mindspeed_profiler.metrics.tracker import MetricsTracker

            self._metrics = MetricsTracker(self, full, rank, world_size)
            self.observers.append(self._metrics)
        # auto_capture asks for its captures through the listener (it listens as dynamic: true does)
        auto = getattr(integ, "auto_capture", None) if request_id is None else None
        if (getattr(integ, "dynamic", False) or auto is not None) and iteration_spans:
            from mindspeed_profiler.ondemand.listener import make_listener

            self._ondemand = make_listener(self, full, integ, rank, world_size)
            if self._ondemand is not None:
                self.observers.append(self._ondemand)
            if auto is not None:
                from mindspeed_profiler.ondemand.auto_capture import add_auto_capture

                add_auto_capture(self, self._ondemand, auto)
        if self.enabled:
            self._resolve(integ, full, rank, world_size, backend)
        # runtime/boundary.py's table, run at start / step / stop (the capture actions only when enabled)
        run = _runners_of(type(self))[self.enabled]
        self._run_start, self._run_step, self._run_stop = run[boundary.START], run[boundary.STEP], run[boundary.STOP]

    def _resolve(self, integ: Any, full: Any, rank: int | None, world_size: int | None, backend: Backend | None) -> None:
        """Who this enabled profiler is, what it plans to capture, and its captures."""
        self.run_id, _ = resolve_run_id(full)
        self.rank, self.world_size, self.local_rank = resolve_rank(rank, world_size)
        self.rank_selected = integ.rank_selected(self.rank, self.role)
        if integ.role_ranks is not None and self.role not in integ.role_ranks:
            warn_once(("role_ranks", self.role), "role %r is not in integrated.role_ranks (%s): its profiler captures nothing",
                      self.role, ", ".join(integ.role_ranks))
        for name in integ.register_stages:  # the config's own stages are known in this process too
            _stages.register_stage(name, owner="config")
        self.plan = plan_from_config(integ)
        self.host = socket.gethostname()
        who = Identity(self.role, self.rank, self.world_size, self.local_rank, self.run_id, self.host, self.request_id)
        self.capturing = Captures(integ, self.plan, who, self.rank_selected, backend, self.spans, self._warn)
        self.captures = self.capturing.finished

    @property
    def backend(self) -> Backend | None:
        """The capture backend (chosen at the first start() unless given); None while off."""
        return self.capturing.backend if self.capturing is not None else None

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

    def attach_engine(self, engine: Any, **kw: Any) -> Any:
        """Make an inference engine (a vLLM LLM / AsyncLLM, vllm-ascend, an SGLang Engine or server
        URL) capture the stage calls this profiler's config selects; `kw`: engines.attach.attach_engine's
        (stage=, replica=, tp_rank=, num_steps=, ...). Returns its handle (docs/rollout.md, "Engine captures")."""
        from mindspeed_profiler.engines.attach import attach_engine

        return attach_engine(self, engine, **kw)

    def record_samples(self, items: Any, stage: str = "actor_generate", *, clock: str | None = None,
                       policy_version: int | None = None) -> int:
        """Per-sample records of a generation stage for the current iteration (docs/rollout.md):
        `items` are vLLM RequestOutputs, SGLang result dicts or plain sample dicts; `clock` says the
        plain dicts' clock (None: time.time(), "monotonic", "perf_counter"); `policy_version` the
        weights' version for the items that do not say (RequestOutputs never do). Attributes are pulled
        now, the lines written at the next step() / stop() (rollout/recorder.py). Returns how many
        items were taken. Bad arguments: ValueError; anything else: a warning."""
        from mindspeed_profiler.rollout.recorder import recorder_of

        return recorder_of(self, self._full).record(self, items, stage, clock, policy_version)

    def start(self, iteration: int = 1) -> None:
        """Iteration `iteration` (1 unless resuming) begins now. Idempotent while running."""
        if self.running:
            return
        if not isinstance(iteration, int) or iteration < 1:
            raise ValueError(f"start(iteration=...): got {iteration!r}; iterations are 1-based integers >= 1")
        self.running = True
        self._iteration = iteration
        STATE.iteration = iteration
        session.RUNNING.add(self)
        session.follow_system_capture()   # a wrapped worker's follower, subscribed at the first start
        self._run_start(self)

    def step(self, tokens: int | None = None, samples: int | None = None, **counts: int) -> None:
        """The current iteration ends and the next one begins. `tokens`, `samples` and `counts`
        (prompt_tokens=, response_tokens=, any name): what the ending iteration did, for the metrics
        (docs/metrics.md); each a non-negative int, else ValueError."""
        given = check_step_counts(tokens, samples, counts) if tokens is not None or samples is not None or counts else {}
        if not self.running:
            return
        self._given_counts = given
        self._run_step(self)

    def stage(self, name: str) -> ContextManager[Any]:
        """Context manager around one call of an RL stage (actor_generate, actor_update, ...)."""
        if not self.enabled and STATE.tracer is None and not self.observers and not observers.ITERATION_LISTENERS:
            return _NULL
        return StageScope(self, name)

    def stop(self) -> None:
        """Stop and export any open capture; reset the process state. Idempotent."""
        if not self.running:
            return
        self.running = False
        self._given_counts = {}
        self._run_stop(self)
        if self.request_id is None and session.EXPORTING:
            # the end of this profiler's run: its exports and its on-demand children's, within bounds
            # (a child stopped mid-run never waits: training goes on while its capture is written)
            session.wait_exports("the profiler stopped", spans=self.spans)
        session.RUNNING.discard(self)
        self._iteration = None
        if self.enabled:
            session.sync_state()  # the other profilers of this process (colocated roles) keep their markers
        session.sync_iteration()  # ... and their stage and iteration

    def for_request(self, cfg: Any, request_id: str, *, rank: int | None, world_size: int | None) -> "IntegratedProfiler":
        """A profiler of this one's class and role answering the on-demand request `request_id`
        (the listener's child: it follows this profiler's iterations, no spans or run.json)."""
        return type(self)(cfg, self.role, rank=rank, world_size=world_size, iteration_spans=False,
                          request_id=request_id)

    # ------------------------------------------------------------------ the boundary actions
    # (runtime/boundary.py orders them and checks their GUARDS; each takes the boundary: START,
    # STEP or STOP)

    def _tell_listeners(self, at: str) -> None:
        it = self._iteration + 1 if at == boundary.STEP else self._iteration
        observers.notify(observers.ITERATION_LISTENERS, at, self, it)

    def _tell_observers(self, at: str) -> None:
        observers.notify(self.observers, at, self, self._iteration)

    def _begin_captures(self, at: str) -> None:
        install_sigterm_handler(session.stop_all_on_sigterm, order=0)   # a SIGTERM exports the open capture first
        self.capturing.get_backend()
        self.capturing.warm_backend()
        session.sync_state()
        if self.rank == 0:
            self._write_manifest_once()
        self.capturing.begin(self._iteration)

    def _step_captures(self, at: str) -> None:
        self.capturing.step(self._iteration)

    def _next_window(self, at: str) -> None:
        self.capturing.next_window(self._iteration)

    def _stop_captures(self, at: str) -> None:
        self.capturing.stop(self._iteration)

    def _close_iteration_span(self, at: str) -> None:
        span, self._iter_span = self._iter_span, None
        # the last step() conventionally ends the last iteration: the one it began is emitted
        # only if a stage ran in it
        if at == boundary.STOP and not self.iteration_busy and hasattr(span, "done"):
            span.done = True  # the tracer's Span drops a span marked done
        self.spans.exit(span)

    def _open_iteration_span(self, at: str) -> None:
        self._iter_span = self.spans.enter(formats.SPAN_ITERATION, formats.CAT_ITERATION, {"iteration": self._iteration})

    def forget_after_fork(self) -> None:
        """In a process forked from the one running this profiler (session.py): its captures and
        iterations are the parent's, never stepped, exported or stopped here; the listener's
        polling thread did not survive the fork."""
        self.running = False
        if self._ondemand is not None:
            self.observers = [o for o in self.observers if o is not self._ondemand]
            self._ondemand = None

    def __enter__(self) -> "IntegratedProfiler":
        self.start()
        return self

    def __exit__(self, *exc: Any) -> bool:
        self.stop()
        return False

    # ------------------------------------------------------------------ helpers

    def _write_manifest_once(self) -> None:
        key = os.path.abspath(self.cfg.profile_save_path)
        if key in session.MANIFESTS_WRITTEN or self.request_id is not None:
            return
        session.MANIFESTS_WRITTEN.add(key)
        try:
            write_run_manifest(self._full or self.cfg, role=self.role, rank=self.rank)
        except Exception as exc:
            self._warn(("manifest",), "could not write run.json under %s: %s: %s", key, type(exc).__name__, exc)


_RUNNERS: dict[type, dict[bool, dict[str, Any]]] = {}


def _runners_of(cls: type) -> dict[bool, dict[str, Any]]:
    """runtime/boundary.py's table for a profiler class (a subclass may override an action),
    enabled and disabled; made once per class."""
    made = _RUNNERS.get(cls)
    if made is None:
        made = _RUNNERS[cls] = {enabled: boundary.runners(cls, captures=enabled) for enabled in (True, False)}
    return made
