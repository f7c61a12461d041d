"""Inference-engine captures from our config: `attach_engine(profiler, engine)` makes the engine
(vLLM `LLM` / `AsyncLLM`, vllm-ascend, an SGLang `Engine`, or a server URL) capture the stage calls
the profiler's own plan selects, and `engine_profiler_args(cfg, engine=...)` says what the engine
must be built with for that (vLLM's profiler is configured only at start-up).

    args = engine_profiler_args(cfg, engine="vllm")          # {"kwargs": ..., "env": ..., "cli": ...}
    llm = vllm.LLM(model, **args["kwargs"])
    prof = IntegratedProfiler(cfg, role="actor")
    attach_engine(prof, llm)                                  # stage="actor_generate"
    with prof.stage("actor_generate"): llm.generate(...)      # a selected call: one engine capture

The handle is an observer (capture/observers.py) of the profiler: a stage call is captured when the
profiler's plan (capture/schedule.Plan: the step window, `stage`) and its rank gates select it, the
same decision the profiler makes for its own captures. The engine starts at the stage's entry and
stops at its exit (SGLang with `num_steps`: by itself); what it wrote is placed in our layout, one
capture per engine worker (engines/outputs.py), with our metadata: role `<role>-<engine>[-r<replica>]`,
the engine worker's rank, the step, the stage, `options.engine` (name, version, replica, tp_rank,
the worker's parallel ranks, what was requested) and a note for every option the engine cannot
honour. An engine failure (an exception, an HTTP error, a timeout) is a warning and a failed
capture's metadata: training goes on.
"""
from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import sys
from pathlib import Path
from typing import Any, ContextManager

from mindspeed_profiler.backends import layout
from mindspeed_profiler.capture.observers import Observer, ObservedProfiler
from mindspeed_profiler.capture.schedule import Plan
from mindspeed_profiler.capture.stages import check_stage_name
from mindspeed_profiler.core import fileio, formats
from mindspeed_profiler.core.state import STATE
from mindspeed_profiler.core.warn import warn_once
from mindspeed_profiler.engines.calls import is_pending, settle
from mindspeed_profiler.engines.outputs import Session, engine_dir, is_ascend_dir, place
from mindspeed_profiler.engines.sglang_engine import SGLANG, SglangDriver, server_env
from mindspeed_profiler.engines.vllm_engine import VLLM, VLLM_ASCEND, VllmDriver, profiler_config
from mindspeed_profiler.runtime.manifest import capture_metadata, split_config
from mindspeed_profiler.runtime.megatron import parallel_layout, parallel_selected

ENGINES = (VLLM, VLLM_ASCEND, SGLANG)
DEFAULT_STAGE = "actor_generate"


def check_engine(name: object) -> str:
    if name not in ENGINES:
        raise ValueError(f"engine {name!r} is not supported: allowed: {', '.join(ENGINES)}")
    return name   # type: ignore[return-value]


def engine_profiler_args(cfg: Any, *, engine: str = VLLM) -> dict[str, Any]:
    """What the engine must be built with for our config (a ProfilerConfig or its `.integrated`) to
    drive its captures, as `{"kwargs": ..., "env": ..., "cli": ...}`:
    - vllm / vllm-ascend: kwargs `profiler_config` (ProfilerConfig's fields: the torch profiler writing
      into `<save_path>/engine/<engine>/`, our flags) and `disable_log_stats=False` (LLM turns the
      per-request stats off otherwise, and the per-sample records need them): `LLM(model, **kwargs)`;
      cli: `vllm serve`'s `--profiler-config <json>`.
    - sglang: kwargs `enable_metrics=True` (the per-request timing in meta_info), env
      SGLANG_TORCH_PROFILER_DIR and the stack / shapes switches: set the env, then `Engine(**kwargs)`;
      cli: `--enable-metrics`.
    An unknown engine is a ValueError naming the allowed ones."""
    _, integ = split_config(cfg)
    name = check_engine(engine)
    directory = engine_dir(integ.profile_save_path, name)
    if name == SGLANG:
        return {"kwargs": {"enable_metrics": True}, "env": server_env(integ, directory), "cli": ["--enable-metrics"]}
    pc = profiler_config(integ, directory, ascend=name == VLLM_ASCEND)
    return {"kwargs": {"profiler_config": pc, "disable_log_stats": False}, "env": {},
            "cli": ["--profiler-config", json.dumps(pc)]}


def engine_kind(engine: Any, kind: str | None = None) -> str:
    """The engine's name: `kind` when given; a URL is an SGLang server unless told (kind="vllm");
    an object by its package (vllm: vllm-ascend when vllm_ascend is imported; sglang)."""
    if kind is not None:
        return check_engine(kind)
    if isinstance(engine, str):
        return SGLANG
    root = type(engine).__module__.split(".")[0]
    if root == "vllm":
        return VLLM_ASCEND if "vllm_ascend" in sys.modules else VLLM
    if root == "sglang":
        return SGLANG
    raise ValueError(f"engine: a {type(engine).__module__}.{type(engine).__qualname__} is neither a vLLM LLM / AsyncLLM "
                     f"nor an SGLang Engine: pass kind= one of {', '.join(ENGINES)}, or a server URL")


def engine_version(engine: Any) -> str | None:
    """The engine package's version when its object's package is imported here (None for a URL)."""
    if isinstance(engine, str):
        return None
    module = sys.modules.get(type(engine).__module__.split(".")[0])
    version = getattr(module, "__version__", None)
    return version if isinstance(version, str) else None


def call_selected(plan: Plan, stage: str, iteration: int) -> bool:
    """Pure: whether the profiler's plan captures this call of `stage` in `iteration` (stage mode:
    the plan's own per-call decision; `stage: all`: the iteration is a recorded one)."""
    return plan.records(iteration) if plan.continuous else plan.stage_call_recorded(stage, iteration)


def session_prefix(text: str) -> str:
    """Pure: a session's profile prefix, unique per capture (role, rank, step, call, pid, time):
    letters, digits, '_' and '-' only (vLLM checks the prefix, validate_profile_prefix, whose rules
    the snapshot does not record: keep to the safest), at most 160 characters (file names stay
    under 255 bytes with vLLM's rank suffix and time)."""
    safe = re.sub(r"[^A-Za-z0-9_\-]", "-", text)
    return safe if len(safe) <= 160 else safe[:120] + "-" + hashlib.sha1(safe.encode()).hexdigest()[:12]


def _check(name: str, value: Any, ok: bool, allowed: str) -> None:
    if not ok:
        raise ValueError(f"attach_engine: {name}={value!r} is not allowed: {allowed}")


def _non_negative(value: Any) -> bool:
    return value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= 0)


def attach_engine(profiler: Any, engine: Any, *, stage: str = DEFAULT_STAGE, replica: int | None = None,
                  tp_rank: int | None = None, kind: str | None = None, role: str | None = None,
                  output_dir: str | os.PathLike | None = None, num_steps: int | None = None,
                  profile_by_stage: bool = False, in_process: bool = False,
                  loop: asyncio.AbstractEventLoop | None = None, timeout_s: float = 60.0) -> "EngineCapture":
    """Make `engine` capture the calls of `stage` that `profiler` (an IntegratedProfiler) selects;
    returns the handle (an observer of the profiler; `detach()` ends it).

    `engine`: a vLLM LLM / AsyncLLM, an SGLang Engine, or a server URL (`http://host:port`: SGLang,
    or vLLM with kind="vllm"). `kind`: vllm | vllm-ascend | sglang when the object does not tell.
    `replica`, `tp_rank`: which rollout replica / tensor-parallel rank this is (the metadata; the
    replica is in the role; tp_rank is the rank of an output that names none). `role`: the engine's
    role in capture names (default `<profiler role>-<engine>[-r<replica>]`). `output_dir`: where the
    engine was built to write (vLLM's torch_profiler_dir; default engine_profiler_args' directory).
    `num_steps`: SGLang stops by itself after that many forward steps (vLLM: max_iterations).
    `profile_by_stage`: SGLang traces prefill and decode apart. `in_process`: the engine's workers
    run in this process (MindSpeed-RL's integrated mode): skipped while our own capture records
    there (one torch profiler per process; that capture already holds the engine's ops). `loop`:
    the event loop an AsyncLLM runs on (engines/calls.settle); `timeout_s`: the most one call may take.
    Bad arguments are a ValueError naming the argument, its value and what is allowed."""
    name = engine_kind(engine, kind)
    check_stage_name(stage)
    _check("replica", replica, _non_negative(replica), "None or an int >= 0")
    _check("tp_rank", tp_rank, _non_negative(tp_rank), "None or an int >= 0")
    _check("num_steps", num_steps, num_steps is None or (_non_negative(num_steps) and num_steps > 0),
           "None or an int >= 1")
    _check("timeout_s", timeout_s, isinstance(timeout_s, (int, float)) and timeout_s > 0, "a number of seconds > 0")
    _check("profile_by_stage", profile_by_stage, not profile_by_stage or name == SGLANG,
           "true only for SGLang (vLLM traces prefill and decode together)")
    if isinstance(engine, str):
        _check("engine", engine, engine.startswith(("http://", "https://")), "a URL http(s)://host:port, or an engine")
    else:
        for method in ("start_profile", "stop_profile"):
            _check("engine", engine, callable(getattr(engine, method, None)), f"an object with {method}()")
    role = layout.check_role(role or f"{profiler.role}-{name}" + (f"-r{replica}" if replica is not None else ""))
    directory = Path(output_dir) if output_dir is not None else engine_dir(profiler.cfg.profile_save_path, name)
    if name == SGLANG:
        driver: Any = SglangDriver(engine, directory, profile_by_stage=profile_by_stage, num_steps=num_steps,
                                   timeout_s=timeout_s)
    else:
        driver = VllmDriver(engine, directory, ascend=name == VLLM_ASCEND, timeout_s=timeout_s)
    handle = EngineCapture(profiler, driver, stage=stage, role=role, replica=replica, tp_rank=tp_rank,
                           version=engine_version(engine), num_steps=num_steps, in_process=in_process, loop=loop,
                           timeout_s=timeout_s)
    profiler.add_observer(handle)
    return handle


class EngineCapture(Observer):
    """An attached engine (see attach_engine): an observer that opens an engine capture around
    each selected call of its stage. `captures`: the metadata of every capture placed, in order."""

    def __init__(self, profiler: Any, driver: Any, *, stage: str, role: str, replica: int | None,
                 tp_rank: int | None, version: str | None, num_steps: int | None, in_process: bool,
                 loop: asyncio.AbstractEventLoop | None, timeout_s: float):
        self.profiler, self.driver = profiler, driver
        self.stage_name, self.role = stage, role
        self.replica, self.tp_rank, self.version = replica, tp_rank, version
        self.num_steps, self.in_process = num_steps, in_process
        self.loop, self.timeout_s = loop, timeout_s
        self.captures: list[dict[str, Any]] = []
        self.pending: list[Session] = []
        self._calls: dict[int, int] = {}

    @property
    def engine(self) -> str:
        return self.driver.name

    def detach(self) -> None:
        """Stop following the profiler (pending captures are placed first)."""
        self.flush(final=True)
        if self in self.profiler.observers:
            self.profiler.observers.remove(self)

    # ------------------------------------------------------------------ the observer

    def stage(self, profiler: ObservedProfiler, name: str) -> ContextManager[Any] | None:
        if profiler is not self.profiler or name != self.stage_name or not self._selected():
            return None
        return _EngineScope(self)

    def step(self, profiler: ObservedProfiler, iteration: int) -> None:
        if self.pending:
            self.flush()

    def stopped(self, profiler: ObservedProfiler, iteration: int | None) -> None:
        self.flush(final=True)

    def _selected(self) -> bool:
        p = self.profiler
        if not p.enabled or p.plan is None or not p.rank_selected or p.iteration is None:
            return False
        wanted = p.cfg.profile_parallel_ranks
        lay = parallel_layout() if wanted else None
        if lay is not None and not parallel_selected(lay, wanted):
            return False
        return call_selected(p.plan, self.stage_name, p.iteration)

    # ------------------------------------------------------------------ one engine capture

    def begin(self) -> Session | None:
        """The stage's entry: the engine's capture started (None when skipped or failed)."""
        if self.pending:   # a capture still open (num_steps not reached) would refuse this one's start
            self.flush(final=True)
        p = self.profiler
        it = p.iteration
        call = self._calls[it] = self._calls.get(it, 0) + 1
        self._calls = {it: call}   # earlier iterations' counts are never needed again
        if self.in_process and STATE.capture_active:
            warn_once(("engine-in-process", self.role), "%s capture of %s (step %d) skipped: our own capture records in "
                      "this process, where the engine runs (one torch profiler per process); it holds the engine's ops",
                      self.engine, self.stage_name, it)
            return None
        rank = self.tp_rank if self.tp_rank is not None else p.rank
        head, tail = formats.worker_prefix(self.role, rank, it, it, call)
        prefix = session_prefix(f"{head}{tail}_{os.getpid()}_{layout.time_token()}")
        session = Session(engine=self.engine, save_dir=layout.stage_dir(p.cfg.profile_save_path, self.stage_name),
                          role=self.role, rank=rank, iteration=it, call=call, host=layout.host_token(p.host),
                          prefix=prefix, raw_dir=self.driver.raw_dir(prefix), meta={})
        options = self.driver.options(p.cfg)
        session.meta = self._meta(session, options)
        try:
            started = settle(self.driver.start(prefix, dict(options), self.num_steps), self.loop, self.timeout_s)
        except Exception as exc:
            self._finish(session, [self._error("start", session, exc)])
            return None
        session.start_task = started if is_pending(started) else None
        if session.start_task is not None:
            session.meta["notes"].append("started as a task on the event loop running in the training thread: the "
                                         "engine began recording when the stage's code first awaited")
        return session

    def end(self, session: Session | None) -> None:
        """The stage's exit: the engine stopped (unless it stops by itself) and its outputs placed."""
        if session is None:
            return
        if self.driver.stops_itself:
            self.pending.append(session)
            return
        start_task = session.start_task
        try:
            stopped = self.driver.stop() if start_task is None else _after(start_task, self.driver.stop)
            stopped = settle(stopped, self.loop, self.timeout_s)
        except Exception as exc:
            self._finish(session, [self._error("stop", session, exc)])
            return
        if is_pending(stopped):   # a loop runs in this thread: placed when the engine has stopped
            stopped.add_done_callback(lambda task: self._finish(session, self._task_errors(session, task)))
            return
        session.stopped = True
        if not self.driver.outputs(session.prefix):   # not written yet (a slow shared disk): the next boundary
            self.pending.append(session)
            return
        self._finish(session, [])

    def flush(self, final: bool = False) -> None:
        """Place the pending captures whose outputs are there; when `final` (the profiler stops, or
        the next capture begins), all of them, stopping an engine that has not stopped by itself."""
        for session in list(self.pending):
            if self.driver.outputs(session.prefix):
                self.pending.remove(session)
                self._finish(session, [])
            elif final:
                self.pending.remove(session)
                errors = []
                if not session.stopped:
                    session.meta["notes"].append(f"num_steps: {self.num_steps}: the engine had not stopped by itself "
                                                 "when the next capture began or the profiler stopped: stopped by "
                                                 "stop_profile")
                    try:
                        settle(self.driver.stop(), self.loop, self.timeout_s)
                    except Exception as exc:
                        errors.append(self._error("stop", session, exc))
                self._finish(session, errors)

    def _finish(self, session: Session, errors: list[dict[str, Any]]) -> None:
        try:
            outputs = self.driver.outputs(session.prefix)
            if any(is_ascend_dir(p) for p in outputs):
                session.meta["device"] = "npu"
                session.meta["notes"].append(self.driver.ascend_note)
            self.captures.extend(place(session, outputs, self.driver.worker_of, errors))
            if session.raw_dir != self.driver.output_dir and session.raw_dir.is_dir() and not any(session.raw_dir.iterdir()):
                session.raw_dir.rmdir()   # SGLang's per-session directory, emptied
        except Exception as exc:
            warn_once(("engine-place", self.engine, type(exc).__name__), "could not place the %s capture of %s (step %d) "
                      "in %s; training goes on: %s: %s", self.engine, self.stage_name, session.iteration,
                      session.save_dir, type(exc).__name__, exc)

    def _meta(self, session: Session, options: dict[str, Any]) -> dict[str, Any]:
        p = self.profiler
        meta = capture_metadata(p.cfg, run_id=p.run_id, role=self.role, stage=self.stage_name, rank=session.rank,
                                world_size=None, local_rank=None, first=session.iteration, last=session.iteration,
                                warmup=0, requested_warmup=0, backend=self.engine, device=self.driver.device,
                                host=p.host, notes=self.driver.notes(p.cfg, p.cfg.warmup_steps, self.num_steps))
        meta["parallel"] = None   # the engine's workers are not this process's Megatron layout: options.engine.worker
        window = (f"the first {self.num_steps} forward steps of the stage call" if self.driver.stops_itself else
                  "the stage call, entry to exit")
        meta["options"] = {"engine": {
            "name": self.engine, "version": self.version, "replica": self.replica, "tp_rank": self.tp_rank,
            "attached_by": {"role": p.role, "rank": p.rank}, "profile_prefix": session.prefix,
            "output_dir": str(session.raw_dir), "window": window, "num_steps": self.num_steps, "request": options,
            "worker": None}}
        return meta

    def _error(self, phase: str, session: Session, exc: BaseException) -> dict[str, Any]:
        warn_once(("engine", self.engine, phase, type(exc).__name__),
                  "inference engine %s: %s_profile failed (%s, stage %s, step %d); capture abandoned, training goes on: "
                  "%s: %s", self.engine, phase, self.role, self.stage_name, session.iteration, type(exc).__name__, exc)
        return {"phase": phase, "error": f"{type(exc).__name__}: {exc}", "time": fileio.utc_now_iso()}

    def _task_errors(self, session: Session, task: Any) -> list[dict[str, Any]]:
        exc = task.exception() if not task.cancelled() else asyncio.CancelledError("the stop task was cancelled")
        return [self._error("stop", session, exc)] if exc is not None else []


async def _after(start_task: Any, stop: Any) -> Any:
    """stop() once the pending start has run (both queued on the loop running in this thread)."""
    await start_task
    result = stop()
    return await result if asyncio.iscoroutine(result) else result


class _EngineScope:
    """Held around one selected stage call: the engine's capture from entry to exit."""

    __slots__ = ("handle", "session")

    def __init__(self, handle: EngineCapture):
        self.handle = handle
        self.session: Session | None = None

    def __enter__(self) -> "_EngineScope":
        self.session = self.handle.begin()
        return self

    def __exit__(self, *exc: Any) -> bool:
        self.handle.end(self.session)
        return False
