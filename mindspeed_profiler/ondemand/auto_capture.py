"""Automatic capture of the slow iteration (`integrated.auto_capture`, the leave-it-on mode).

An observer of the profiler (capture/observers.py) times every iteration with the profiler's own
clock (`iteration_window`), or one stage with a timer held around its calls, and keeps a running
median of the last `window` times. When an iteration (or the stage in it) takes more than `factor`
x that median, after `min_history` timed iterations, it asks this worker's on-demand listener
(listener.py) for a capture of iterations slow + 1 + lead_iterations .. + iterations - 1: the
request id is derived from the role and the slow iteration (core/auto_reason.py), so every rank
that saw the same slow iteration makes the same request and decides it at the same boundary,
with no message between ranks. The request is also posted (RUN_DIR/requests/, and the run's Ray
mailbox under Ray), where the listeners of ranks that did not see the slowness themselves pick it
up at their next poll (within about a second): they capture the same iterations when they get it before its first one begins
(lead_iterations gives them that time). At most `max_captures` per run on a worker (its own and
those it picked up); none while a capture runs or waits on this worker; iterations under a capture
are not timed (a capture slows them).

Off (`auto_capture` null / false, the default), nothing of this is built: step() is unchanged.
"""
from __future__ import annotations

import bisect
import collections
import logging
from time import perf_counter
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Mapping

from mindspeed_profiler.capture.observers import ObservedProfiler, Observer
from mindspeed_profiler.core import auto_reason
from mindspeed_profiler.core.fileio import utc_now_iso
from mindspeed_profiler.core.warn import warn_once
from mindspeed_profiler.ondemand import requests as rq

if TYPE_CHECKING:
    from mindspeed_profiler.ondemand.listener import Listener
    from mindspeed_profiler.runtime.protocols import Profiler

log = logging.getLogger("mindspeed_profiler.ondemand")


class RunningMedian:
    """The median of the last `window` values: a ring of them in arrival order and the same values
    sorted (bisect), O(window) per value with a small constant (window ~100: a few microseconds)."""

    def __init__(self, window: int):
        self.window = window
        self._ring: collections.deque[float] = collections.deque()
        self._sorted: list[float] = []

    def __len__(self) -> int:
        return len(self._ring)

    def add(self, value: float) -> None:
        if len(self._ring) == self.window:
            old = self._ring.popleft()
            del self._sorted[bisect.bisect_left(self._sorted, old)]
        self._ring.append(value)
        bisect.insort(self._sorted, value)

    def median(self) -> float | None:
        s = self._sorted
        n = len(s)
        if not n:
            return None
        return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


class _StageTimer:
    """Held around each call of the timed stage: adds its time to the iteration's."""

    __slots__ = ("auto", "t0")

    def __init__(self, auto: "AutoCapture"):
        self.auto = auto
        self.t0 = 0.0

    def __enter__(self) -> "_StageTimer":
        self.t0 = perf_counter()
        return self

    def __exit__(self, *exc: Any) -> bool:
        self.auto.stage_s = (self.auto.stage_s or 0.0) + (perf_counter() - self.t0)
        return False


def is_slow(time_s: float, median_s: float | None, history: int, settings: Mapping[str, Any]) -> bool:
    """Pure: whether a time is slow enough to fire, given the median of `history` earlier times."""
    return (median_s is not None and history >= settings["min_history"] and median_s > 0
            and time_s > settings["factor"] * median_s and time_s >= settings["min_time_s"])


class AutoCapture(Observer):
    """One per IntegratedProfiler with `integrated.auto_capture`, in its observers before its
    listener (so that a request made at a boundary is taken at that same boundary)."""

    def __init__(self, owner: Profiler, listener: Listener, settings: Mapping[str, Any]):
        self.owner = owner
        self.listener = listener
        self.settings = settings
        self.stage_name: str | None = settings["stage"]
        self.times = RunningMedian(settings["window"])
        self.stage_s: float | None = None   # the timed stage's time in the current iteration
        self.accepted_ids: list[str] = []   # automatic requests this worker accepted (its own and picked up)
        self.fired: list[dict[str, Any]] = []   # the reasons of the requests this worker made
        self.passed: list[int] = []   # slow iterations not captured (max_captures reached, a capture busy)
        integ = listener.integ
        # the job's own static window, with its warm-up: iterations under a capture are not timed
        self._static = tuple((a - integ.warmup_steps, b) for a, b in integ.step_runs) if integ.profile else ()
        listener.auto = self

    # ------------------------------------------------------------------ the listener asks

    def refusal(self) -> str | None:
        """Why this worker takes no more automatic requests, or None."""
        m = self.settings["max_captures"]
        if len(self.accepted_ids) >= m:
            return (f"auto_capture.max_captures={m} reached on this worker (requests "
                    f"{', '.join(self.accepted_ids)})")
        return None

    def accepted(self, req: rq.Request) -> None:
        self.accepted_ids.append(req.id)

    # ------------------------------------------------------------------ the observer

    def stage(self, profiler: ObservedProfiler, name: str) -> _StageTimer | None:
        return _StageTimer(self) if name == self.stage_name else None

    def step(self, profiler: ObservedProfiler, iteration: int) -> None:
        """Iteration `iteration - 1` ended: time it; fire when it was slow."""
        ended = iteration - 1
        if self.stage_name is None:
            began, end = profiler.iteration_window
            t = end - began if began is not None and end is not None else None
        else:
            t, self.stage_s = self.stage_s, None
        if t is None or self._captured(ended):
            return
        median = self.times.median()
        if is_slow(t, median, len(self.times), self.settings):
            refused = self.refusal() or (None if self._idle() else "a capture is running or waiting on this worker")
            if refused is None:
                self._fire(ended, t, median, iteration)
            else:
                self.passed.append(ended)
                log.info("auto_capture on %s: iteration %d took %.3f s, %.1fx the running median, not captured: %s",
                         self.listener.key, ended, t, t / median, refused)
        self.times.add(t)

    def _captured(self, iteration: int) -> bool:
        """Whether a capture ran in `iteration` (an on-demand child, or the job's static window)."""
        lst = self.listener
        return lst.active is not None or any(a <= iteration <= b for a, b in self._static)

    def _idle(self) -> bool:
        lst = self.listener
        return lst.active is None and not lst.queue and not lst.pending

    def _fire(self, slow: int, t: float, median: float, iteration: int) -> None:
        s = self.settings
        first = iteration + s["lead_iterations"]
        last = first + s["iterations"] - 1
        role, rank = self.owner.role, self.listener.rank
        reason = {"slow_iteration": slow, "time_s": round(t, 6), "median_s": round(median, 6),
                  "ratio": round(t / median, 3), "factor": s["factor"], "stage": self.stage_name,
                  "history": len(self.times), "role": role, "rank": rank, "iterations": [first, last]}
        req = rq.Request(id=auto_reason.request_id(role, slow), iterations=(first, last), roles=(role,),
                         source="auto", created=utc_now_iso(), auto=MappingProxyType(reason))
        self.fired.append(reason)
        log.info("auto_capture on %s: iteration %d took %.3f s, %.1fx the running median %.3f s%s: capturing "
                 "iterations %d-%d", self.listener.key, slow, t, t / median, median,
                 f" of {self.stage_name}" if self.stage_name else "", first, last)
        self.listener.submit(req)
        self.listener.post(req)   # for the ranks that did not see it: RUN_DIR/requests/, the Ray mailbox


def add_auto_capture(owner: Profiler, listener: Listener | None, settings: Mapping[str, Any]) -> AutoCapture | None:
    """Put an AutoCapture in `owner`'s observers, before its `listener`; None (reported) without a
    listener (it could not be made): training goes on without it."""
    if listener is None:
        warn_once(("auto-capture-no-listener",), "auto_capture unavailable on this worker: no on-demand listener "
                  "(training goes on)")
        return None
    auto = AutoCapture(owner, listener, settings)
    owner.observers.insert(owner.observers.index(listener), auto)
    return auto


__all__ = ["AutoCapture", "RunningMedian", "add_auto_capture", "is_slow"]
