"""The worker side of on-demand capture (`integrated.dynamic: true`).

A background thread polls the request sources (transport.py) once a second (a stat per file
source, a remote call under Ray) and writes this worker's heartbeat and request states. The listener
is an observer of its owner profiler (observers.py: started / stage / step / stopped); the training
thread only looks at a list at each iteration boundary (the owner's step()), so an idle listener
costs step() an attribute check. An accepted request runs as a child IntegratedProfiler built from the job's
`integrated` settings plus the request's, with the request's iterations as its window: the same
stage / rank / level semantics as the static config, its own capture set, its id in every
capture's metadata. Nothing here raises into training: a bad request is rejected, with the reason
in the worker's state file.
"""
from __future__ import annotations

import collections
import dataclasses
import logging
import os
import socket
import threading
import time
from typing import TYPE_CHECKING, Any

from mindspeed_profiler.core import formats
from mindspeed_profiler.core.auto_reason import reason_note
from mindspeed_profiler.core.warn import warn_once
from mindspeed_profiler.capture.observers import ObservedProfiler, Observer
from mindspeed_profiler.ondemand import requests as rq
from mindspeed_profiler.ondemand import transport as tp

if TYPE_CHECKING:
    from mindspeed_profiler.runtime.protocols import Profiler

log = logging.getLogger("mindspeed_profiler.ondemand")

# One tick per second: a stat of requests/ and one of profiler_config.json (a file is read only when
# its directory or itself changed) and, under Ray, one remote call to the run's mailbox. The state
# file (heartbeat) is written every STATE_EVERY ticks, and at once when a request changes state.
POLL_INTERVAL_S = 1.0
STATE_EVERY = 2
ITERATION_HISTORY = 8  # boundaries kept to estimate the iteration period (trigger uses it)
MAX_FINAL_ENTRIES = 64  # finished / rejected requests kept in the state file (the newest): it stays small


@dataclasses.dataclass
class _Entry:
    """One request's life on this worker."""

    request: rq.Request | None
    state: str
    reason: str | None = None
    first: int | None = None
    last: int | None = None
    captures: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    child: Profiler | None = None  # the IntegratedProfiler running it
    source: str = "file"
    cfg: Any = None    # the child's ProfilerConfig (job settings + request, the request's window)
    begin: int = 0     # the iteration at which the child starts (its first, less its warmup)

    def to_dict(self) -> dict[str, Any]:
        return {"state": self.state, "reason": rq.short_reason(self.reason),
                "iterations": [self.first, self.last] if self.first is not None else None,
                "source": self.source,
                "captures": [{"directory": c.get("directory"), "stage": c.get("stage"), "steps": c.get("steps"),
                              "status": c.get("status")} for c in self.captures]}


class Listener(Observer):
    """One per listening IntegratedProfiler (`owner`), in its `observers`."""

    def __init__(self, owner: Profiler, full: Any, integ: Any, *, rank: int | None = None, world_size: int | None = None):
        from mindspeed_profiler.runtime.manifest import resolve_run_id
        from mindspeed_profiler.runtime.ranks import resolve_rank

        self.owner = owner
        self.full = full
        self.integ = integ
        self.run_dir = integ.profile_save_path
        self.run_id, _ = resolve_run_id(full)
        self.rank, self.world_size, _ = resolve_rank(rank, world_size)
        self.key = tp.worker_key(owner.role, self.rank)
        self.static_runs = integ.step_runs if integ.profile else ()
        # (id, source kind, Request or the RequestError / reason, its child config): parsed and validated
        # by the poller thread, so that step() never pays for a request's size
        self.pending: collections.deque[tuple[str, str, Any, Any]] = collections.deque()
        self.entries: dict[str, _Entry] = {}
        self.active: _Entry | None = None   # the request whose capture runs now
        self.queue: list[_Entry] = []       # accepted requests waiting for their first iteration, by begin
        self._boundaries: collections.deque[tuple[int, float]] = collections.deque(maxlen=ITERATION_HISTORY)
        self._iteration: int | None = None
        self._dirty = True
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._sources: list[Any] = []
        self._mailbox_source: Any = None
        self._lock = threading.Lock()   # entries are written by the training thread, read by the poller
        self.polls_started = self.polls_done = 0
        self.auto: Any = None   # the owner's automatic capture (auto_capture.py), which sets it: its budget M
        self.began: float | None = None   # wall clock when it started listening (in its heartbeat: `started`)

    # ------------------------------------------------------------------ training thread

    def started(self, profiler: ObservedProfiler, iteration: int) -> None:
        self._boundary(iteration)
        if self._thread is None:
            self.began = time.time()
            if not self.owner.enabled:   # a profiling owner writes run.json itself (rank 0, at its start)
                self._claim_run()
            self._sources = [tp.RequestDirSource(self.run_dir), tp.NpuConfigSource(self.run_dir)]
            self._thread = threading.Thread(target=self._loop, name=f"mindspeed-profiler-requests-{self.key}", daemon=True)
            self._thread.start()

    def _claim_run(self) -> None:
        """`profile: false` writes no run.json, and without start_run nobody else does: trigger and
        status would find no run here. Make it findable (manifest.claim_run: one run id for every
        rank), then report this worker at once, so that a rank starting later sees the run is live."""
        from mindspeed_profiler.runtime.manifest import claim_run
        from mindspeed_profiler.ondemand.trigger import run_is_live

        try:
            self.run_id = claim_run(self.full or self.integ, self.run_dir, role=self.owner.role, rank=self.rank,
                                    live=lambda old: run_is_live(self.run_dir, old.get("run_id")))
        except Exception as exc:
            warn_once(("ondemand-run", type(exc).__name__), "on-demand listener of %s: could not write run.json under %s "
                      "(trigger cannot find this job there; training goes on): %s: %s", self.key, self.run_dir,
                      type(exc).__name__, exc)
            return
        self._write_state()

    def step(self, profiler: ObservedProfiler, iteration: int) -> None:
        """Iteration `iteration` begins (the owner's step()): advance the running child, then
        take the requests that arrived. Cheap when nothing is pending or running."""
        # the periods from a monotonic clock: a wall-clock step (NTP) must not make one negative
        self._boundaries.append((iteration, time.monotonic()))
        self._iteration = iteration
        if self.active is None and not self.pending and not self.queue:
            return
        self._boundary(iteration)

    def stage(self, profiler: ObservedProfiler, name: str):
        """The child's stage scope, or None."""
        entry = self.active
        if entry is not None and entry.child is not None:
            return entry.child.stage(name)
        return None

    def stopped(self, profiler: ObservedProfiler, iteration: int | None = None) -> None:
        """The owner stops: a running capture exports what it recorded, queued ones are rejected."""
        entry = self.active
        if entry is not None:
            entry.child.stop()
            self._finish(entry, stopped_early=True)
        for entry in self.queue:
            self._set(entry, "rejected", reason=f"the worker stopped at iteration {self._iteration} before iteration {entry.first}")
        self.queue = []
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        self._write_state()

    def _boundary(self, iteration: int) -> None:
        self._iteration = iteration
        entry = self.active
        if entry is not None and entry.child is not None:
            try:
                entry.child.step()
            except Exception as exc:   # the profiler never raises; belt and braces
                log.warning("on-demand capture %s: step failed: %s", entry.request.id, exc)
            if iteration > entry.last:
                entry.child.stop()
                self._finish(entry)
        while self.pending:
            self._take(*self.pending.popleft(), iteration)
        if self.active is None and self.queue and iteration >= self.queue[0].begin:
            self._start_child(self.queue.pop(0), iteration)

    def _take(self, rid: str, kind: str, req: Any, cfg: Any, iteration: int) -> None:
        """A request the poller parsed: rejected with its reason, or decided for this worker (cheap)."""
        if rid in self.entries:
            return
        if not isinstance(req, rq.Request):
            self._reject(rid, kind, str(req))
            return
        refused = self.auto.refusal() if req.auto is not None and self.auto is not None else None
        if refused:   # an automatic request beyond this worker's max_captures
            self._record(req.id, _Entry(req, "rejected", reason=refused, source=kind))
            return
        busy = [(e.request.id, e.begin, e.last) for e in ([self.active] if self.active else []) + self.queue]
        d = rq.decide(req, role=self.owner.role, rank=self.rank, iteration=iteration,
                      ranks_selected=cfg.integrated.rank_selected(self.rank, self.owner.role), busy=busy, static_runs=self.static_runs,
                      warmup=cfg.integrated.warmup_steps)
        entry = _Entry(req, d.state, reason=d.reason, first=d.first, last=d.last, source=kind)
        if d.state == "requested":
            entry.cfg = _with_window(cfg, d.first, d.last)
            entry.begin = max(iteration, d.first - cfg.integrated.warmup_steps)
            self.queue.append(entry)
            self.queue.sort(key=lambda e: e.begin)
            log.info("on-demand capture %s accepted on %s: iterations %d-%d", req.id, self.key, d.first, d.last)
            if req.auto is not None and self.auto is not None:
                self.auto.accepted(req)
        else:
            log.info("on-demand request %s %s on %s: %s", req.id, d.state, self.key, d.reason)
        self._record(req.id, entry)

    def _prepare(self, rid: str, kind: str, raw: Any) -> tuple[str, str, Any, Any] | None:
        """Poller thread: parse and validate one polled request against the job's settings ->
        (id, kind, Request, child config), or (id, kind, the reason, None); None for another run's
        request left in a reused directory."""
        if isinstance(raw, Exception):
            return rid, kind, f"malformed request: {raw}", None
        try:
            if kind == "torch_npu":
                req = rq.parse_torch_npu_config(raw, rid)
            else:
                req = rq.parse_request(raw, rid)
                if kind == "file":
                    req = dataclasses.replace(req, id=rid)   # the file name is the id status shows
                run = raw.get("run_id")
                if run and self.run_id:
                    if run != self.run_id:
                        return None
                elif kind == "file" and not self._made_in_this_run(rid):
                    return None
            rq.check_limits(req.integrated, self.integ)
            return req.id, kind, req, self._child_config(req)
        except rq.RequestError as exc:
            return rid, kind, str(exc), None
        except Exception as exc:
            from mindspeed_profiler.config import ProfilerConfigError

            if isinstance(exc, ProfilerConfigError):
                reason = "; ".join(f"{p.split('integrated.', 1)[-1]}: {m}" for p, m in exc.problems[:10])
            else:
                reason = f"{type(exc).__name__}: {exc}"
            return rid, kind, reason, None

    def _made_in_this_run(self, rid: str) -> bool:
        """Poller thread: whether a request file that no run id binds (this run has none, or the file
        names none) was written while this run went on, not left by an earlier run in the same
        directory: its time is at most STALE_AFTER_S before the earliest start of this run's live
        listeners (a rank that started later still takes what was asked before it started; a run
        ended less than that long ago counts as this one, as it does for run.json: trigger.run_is_live)."""
        from mindspeed_profiler.ondemand.trigger import STALE_AFTER_S, live_workers

        try:
            made = os.stat(tp.requests_dir(self.run_dir) / f"{rid}.json").st_mtime
        except OSError:
            return True   # gone again: its content was read
        now = time.time()
        began = [self.began if self.began is not None else now]
        states = tp.read_worker_states(self.run_dir)
        for state in live_workers({k: v for k, v in states.items() if v.get("run_id") == self.run_id}, now).values():
            started = (state.get("heartbeat") or {}).get("started")
            if isinstance(started, (int, float)) and not isinstance(started, bool):
                began.append(started)
        if made >= min(began) - STALE_AFTER_S:
            return True
        log.info("on-demand request %s on %s: left by an earlier run in %s (written before this run began): "
                 "not taken", rid[:128], self.key, self.run_dir)
        return False

    def _child_config(self, req: rq.Request):
        """The job's integrated settings with the request's on top, validated like a config."""
        from mindspeed_profiler.config import plain, validate

        base = plain(self.integ)
        base.update(dict(req.integrated))
        base.update(profile=True, dynamic=False, profile_steps=None, profile_step_start=1, profile_step_end=2)
        cfg = validate({"integrated": base}, check_paths=False)
        return dataclasses.replace(cfg, run_id=self.run_id)

    def _start_child(self, entry: _Entry, iteration: int) -> None:
        try:
            child = self.owner.for_request(entry.cfg, entry.request.id, rank=self.rank, world_size=self.world_size)
            if entry.request.auto is not None and getattr(child, "capturing", None) is not None:
                # an automatic capture: its reason in every capture's metadata (the analysis's finding reads it)
                child.capturing.notes.append(reason_note(entry.request.auto))
            child.start(iteration)
        except Exception as exc:
            self._set(entry, "rejected", reason=f"the capture could not start: {type(exc).__name__}: {exc}")
            return
        entry.child = child
        self.active = entry
        self._set(entry, "running")

    def _finish(self, entry: _Entry, stopped_early: bool = False) -> None:
        child = entry.child
        entry.captures = list(child.captures) if child is not None else []
        # "exporting" / "held": recorded, its files written off the training thread or when the run
        # ends (export_after_run): not a failure
        failed = [c for c in entry.captures if c.get("status") not in ("ok", "exporting", "held")]
        reason = None
        if stopped_early:
            reason = f"the worker stopped at iteration {self._iteration}: recorded up to there"
        elif failed:
            reason = f"{len(failed)} of {len(entry.captures)} capture(s) not ok: " + "; ".join(
                "; ".join(e.get("error", "") for e in c.get("errors") or []) or str(c.get("status")) for c in failed)
        elif not entry.captures:
            reason = "no stage selected by the request ran in its iterations" if entry.cfg.integrated.stages else "nothing was captured"
        self._set(entry, "done", reason=reason)
        entry.child = None
        self.active = None

    def submit(self, req: rq.Request, kind: str = "auto") -> None:
        """A request made in this process (auto_capture.py), taken at the current boundary's own
        step() call when this listener is told after its maker: validated here, on the training
        thread (once per request); a request that does not validate is rejected with its reason."""
        taken = self._prepare(req.id, kind, req.to_dict())
        if taken is not None:
            self.pending.append(taken)

    def post(self, req: rq.Request) -> None:
        """Make `req` reach the run's other workers: a request file under RUN_DIR/requests/ and,
        under Ray, the run's mailbox (workers on nodes that do not share RUN_DIR). Written once per
        automatic capture; a failure is reported once and training goes on."""
        raw = {**req.to_dict(), "run_id": self.run_id}
        box = self._mailbox_source   # set by the poller thread: None (not yet), False (no Ray) or the source
        for where, send in (("file", lambda: tp.submit_file(self.run_dir, raw)),
                            ("mailbox", (lambda: box.submit(raw)) if box else None)):
            if send is None:
                continue
            try:
                send()
            except Exception as exc:   # the ranks that saw the slowness themselves capture anyway
                warn_once(("ondemand-post", where, type(exc).__name__), "on-demand listener of %s: could not post "
                          "request %s to the other workers (%s): %s: %s", self.key, req.id, where, type(exc).__name__, exc)

    def _reject(self, rid: str, kind: str, reason: str) -> None:
        self._record(rid, _Entry(None, "rejected", reason=reason, source=kind))
        log.warning("on-demand request %s rejected on %s: %s", rid[:128], self.key, rq.short_reason(reason))

    def _record(self, rid: str, entry: _Entry) -> None:
        """Keep an entry; of the final ones (done / rejected / skipped) only the newest
        MAX_FINAL_ENTRIES stay (a stream of bad requests must not grow the state file without end)."""
        with self._lock:
            self.entries[rid] = entry
            final = [k for k, e in self.entries.items() if e.state in rq.FINAL_STATES]
            for k in final[:max(0, len(final) - MAX_FINAL_ENTRIES)]:
                del self.entries[k]
        self._dirty = True

    def _set(self, entry: _Entry, state: str, reason: str | None = None) -> None:
        entry.state = state
        if reason is not None:
            entry.reason = reason
        self._dirty = True

    # ------------------------------------------------------------------ poller thread

    def _loop(self) -> None:
        tick = 0
        while not self._stop.wait(POLL_INTERVAL_S):
            tick += 1
            self.polls_started = tick
            for source in list(self._sources):
                try:
                    for rid, raw in source.poll():
                        taken = self._prepare(rid, source.kind, raw)
                        if taken is not None:
                            self.pending.append(taken)
                except Exception as exc:   # a failing source is reported once per kind and retried
                    warn_once(("ondemand-poll", source.kind, type(exc).__name__), "on-demand listener of %s: polling %s "
                              "failed (retrying): %s: %s", self.key, source.kind, type(exc).__name__, exc)
            if self._dirty or tick % STATE_EVERY == 0:
                self._write_state()
            if self._mailbox_source is None:
                self._maybe_add_mailbox()
            self.polls_done = tick   # every source polled this many times (tests wait on it)

    def _maybe_add_mailbox(self) -> None:
        """Under Ray, the run's mailbox joins the sources (made by the first worker that looks)."""
        if self._mailbox_source is not None or not self.run_id:
            return
        import sys

        ray = sys.modules.get("ray")
        if ray is None or not ray.is_initialized():
            self._mailbox_source = False
            return
        try:
            box = tp.get_mailbox(self.run_id, create=True)
        except Exception as exc:
            warn_once(("ondemand-mailbox", type(exc).__name__), "on-demand listener of %s: no Ray mailbox (requests reach it "
                      "through %s only): %s: %s", self.key, self.run_dir, type(exc).__name__, exc)
            self._mailbox_source = False
            return
        self._mailbox_source = tp.MailboxSource(box)
        self._sources.append(self._mailbox_source)

    def state(self) -> dict[str, Any]:
        period = fastest = None
        marks = list(self._boundaries)
        steps = [(t1 - t0) / (i1 - i0) for (i0, t0), (i1, t1) in zip(marks, marks[1:]) if i1 > i0]
        if steps:
            period = sorted(steps)[len(steps) // 2]
            # the fastest recent iteration: a window with a capture export in it must not make the
            # trigger think the job is slower than it is (it would ask for iterations already begun)
            fastest = min(steps)
        with self._lock:
            reqs = {rid: e.to_dict() for rid, e in self.entries.items()}
        from mindspeed_profiler.capture import stages

        return {
            "schema": 1, "worker": self.key, "role": self.owner.role, "rank": self.rank, "run_id": self.run_id,
            "host": socket.gethostname(), "pid": os.getpid(),
            "heartbeat": {"time": time.time(), "iteration": self._iteration, "iteration_period_s": period,
                          "fastest_period_s": fastest, "started": self.began,
                          "poll_interval_s": POLL_INTERVAL_S, "state_every": STATE_EVERY,
                          "listening": not self._stop.is_set()},
            "stages": list(stages.registered_stages()),
            "requests": reqs,
        }

    def _write_state(self) -> None:
        self._dirty = False
        state = self.state()
        try:
            tp.report_file(self.run_dir, self.key, state)
        except tp.UnsafeTree as exc:
            warn_once(("ondemand-unsafe-tree",), "on-demand listener of %s: %s", self.key, exc)
        except OSError as exc:
            warn_once(("ondemand-state", type(exc).__name__), "on-demand listener of %s: cannot write its state under %s: %s",
                      self.key, self.run_dir, exc)
        if self._mailbox_source:
            try:
                self._mailbox_source.report(self.key, state)
            except Exception:
                pass


def _with_window(cfg: Any, first: int, last: int) -> Any:
    """`cfg` recording exactly iterations [first, last] (a start / end window, never a list)."""
    integ = dataclasses.replace(cfg.integrated, profile_steps=None, profile_step_start=first, profile_step_end=last + 1)
    return dataclasses.replace(cfg, integrated=integ)


def make_listener(owner: Profiler, full: Any, integ: Any, rank: int | None, world_size: int | None) -> Listener | None:
    """A Listener for `owner`, or None (reported) when it cannot be made: training goes on."""
    try:
        return Listener(owner, full, integ, rank=rank, world_size=world_size)
    except Exception as exc:
        warn_once(("ondemand-init", type(exc).__name__), "on-demand capture unavailable on this worker (training goes on): %s: %s",
                  type(exc).__name__, exc)
        return None


__all__ = ["Listener", "make_listener", "POLL_INTERVAL_S", "formats"]
