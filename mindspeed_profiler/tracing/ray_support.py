"""Ray helpers: align every actor's tracer clock to the driver's, without a method on the actor.

`sync_actor_clocks(actors)` runs on the driver: for each actor, a few blocking round trips read
the actor's tracer clock (via Ray's `actor.__ray_call__`, or the `TracerClockMixin` methods when
a Ray version lacks it); the min-RTT midpoint gives the offset, which the actor records in its
segment (`clock` record) and merge applies. One-off cost: `rounds` round trips per actor.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Optional

from mindspeed_profiler.core.state import STATE
from mindspeed_profiler.core.warn import warn_once
from mindspeed_profiler.tracing.clock import OffsetEstimate, measure_offset


@dataclass(frozen=True)
class ClockSync:
    actor: Any
    estimate: Optional[OffsetEstimate]  # None: the actor has no tracer, or the sync failed
    error: Optional[str] = None


def _tracer_now(_self: Any = None) -> Optional[int]:
    rec = STATE.tracer
    return rec.now_wall_ns() if rec is not None else None


def _tracer_set_offset(_self: Any, offset_ns: int, uncertainty_ns: int, rtt_ns: int, samples: int, reference: str) -> bool:
    rec = STATE.tracer
    if rec is None:
        return False
    rec.set_clock_offset(OffsetEstimate(offset_ns, uncertainty_ns, rtt_ns, samples), reference)
    return True


class TracerClockMixin:
    """Optional mixin for worker classes: the same two calls as methods (for Ray without __ray_call__)."""

    def tracer_clock_now(self) -> Optional[int]:
        return _tracer_now(self)

    def tracer_set_clock_offset(self, offset_ns: int, uncertainty_ns: int, rtt_ns: int, samples: int, reference: str) -> bool:
        return _tracer_set_offset(self, offset_ns, uncertainty_ns, rtt_ns, samples, reference)


def _caller(actor: Any):
    if hasattr(actor, "__ray_call__"):
        return lambda fn, *a: actor.__ray_call__.remote(fn, *a)
    names = {_tracer_now: "tracer_clock_now", _tracer_set_offset: "tracer_set_clock_offset"}
    return lambda fn, *a: getattr(actor, names[fn]).remote(*a)


def sync_actor_clocks(actors: Iterable[Any], rounds: Optional[int] = None, timeout_s: float = 30.0) -> list[ClockSync]:
    """Estimate and record each actor's clock offset to this (driver) process. Never raises.

    Needs this process's tracer (`init_tracer(..., role="driver")`); returns [] when tracing is off
    or `tracer.clock_sync` is false. `rounds` defaults to `tracer.clock_sync_rounds`.
    """
    rec = STATE.tracer
    if rec is None:
        return []
    if rounds is None and not rec.clock_sync:
        return []  # tracer.clock_sync: false (an explicit `rounds` still syncs)
    import ray

    n = rounds if rounds is not None else rec.clock_sync_rounds
    reference = f"{rec.role}:{rec.rank}@{rec.header['host']}:{rec.pid}"
    results = []
    for actor in actors:
        try:
            call = _caller(actor)
            est = measure_offset(lambda: ray.get(call(_tracer_now), timeout=timeout_s), rec.now_wall_ns, n)
            if est is not None:
                ray.get(call(_tracer_set_offset, est.offset_ns, est.uncertainty_ns, est.rtt_ns, est.samples, reference), timeout=timeout_s)
            results.append(ClockSync(actor, est))
        except Exception as exc:
            warn_once(f"clock-sync-{type(exc).__name__}", f"mindspeed-profiler tracer: clock sync with an actor failed ({exc!r}); its spans stay on its own clock")
            results.append(ClockSync(actor, None, repr(exc)))
    return results


def shutdown_actor_tracers(actors: Iterable[Any], timeout_s: float = 30.0) -> int:
    """Flush and close the tracers of these actors (before `ray.kill` or the end of the run)."""
    import ray

    from mindspeed_profiler.tracing.api import shutdown_tracer

    refs = []
    for actor in actors:
        try:
            refs.append(actor.__ray_call__.remote(lambda _self: shutdown_tracer()))
        except Exception:
            continue
    done = 0
    for ref in refs:
        try:
            ray.get(ref, timeout=timeout_s)
            done += 1
        except Exception as exc:
            warn_once("tracer-actor-shutdown", f"mindspeed-profiler tracer: closing an actor's tracer failed ({exc!r})")
    return done
