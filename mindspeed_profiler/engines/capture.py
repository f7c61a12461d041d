"""One attached engine's captures (engines/attach.py makes it): `EngineCapture`, an observer of the
profiler that starts the engine at the entry of each stage call the profiler's plan selects and
stops it at the exit (or lets SGLang stop by itself with num_steps), then places what it wrote in
our layout (outputs.py) with our metadata. Every engine failure is a warning and a failed capture's
metadata; nothing here raises into the training loop (the observers' stage contexts are guarded
too, capture/observers.py).
"""
from __future__ import annotations

import asyncio
import hashlib
import os
import re
from typing import Any, ContextManager

from mindspeed_profiler.backends import layout
from mindspeed_profiler.capture.observers import Observer, ObservedProfiler
from mindspeed_profiler.capture.schedule import Plan
from mindspeed_profiler.core import fileio, formats
from mindspeed_profiler.core.state import STATE
from mindspeed_profiler.core.warn import warn_once
from mindspeed_profiler.engines.calls import is_pending, is_timeout, settle
from mindspeed_profiler.engines.outputs import Session, is_ascend_dir, place
from mindspeed_profiler.runtime.manifest import capture_metadata
from mindspeed_profiler.runtime.megatron import parallel_layout, parallel_selected


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
            errors = [self._error("start", session, exc)]
            if is_timeout(exc):
                self._stop_late_start(session, errors)
            self._finish(session, errors)
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
                errors: list[dict[str, Any]] = []
                if not session.stopped:
                    self._stop_now(session, errors, f"num_steps: {self.num_steps}: the engine had not stopped by "
                                   "itself when the next capture began or the profiler stopped: stopped by stop_profile")
                self._finish(session, errors)

    def _stop_late_start(self, session: Session, errors: list[dict[str, Any]]) -> None:
        """A start that did not answer within timeout_s may still begin (the server or the engine's
        loop goes on with it): the engine is told to stop at once, so that it does not record for
        the rest of the run. vLLM orders the two (AsyncLLM's profile lock)."""
        self._stop_now(session, errors, f"start_profile did not answer within timeout_s ({self.timeout_s:g} s): "
                       "stop_profile sent at once, so that an engine that starts late does not record for the rest of "
                       "the run")

    def _stop_now(self, session: Session, errors: list[dict[str, Any]], why: str) -> None:
        """stop_profile outside a stage's exit, `why` in the capture's notes; a stop that fails is one
        more error of the capture."""
        session.meta["notes"].append(why)
        try:
            settle(self.driver.stop(), self.loop, self.timeout_s)
        except Exception as exc:
            errors.append(self._error("stop", session, exc))

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
