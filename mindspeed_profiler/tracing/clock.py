"""Clocks: a monotonic clock anchored to wall time, and the offset estimator for cross-process alignment.

Spans are timed with `time.monotonic_ns()` (cheap, never jumps); the segment header keeps one
(wall_ns, mono_ns) anchor, so a span's wall time is `wall_ns + (t - mono_ns)`. Processes on other
hosts may disagree about wall time: the driver estimates each process's offset from a few round
trips (NTP-style: keep the sample with the smallest round-trip time and assume the remote read
happened at its midpoint), and merge adds that offset to the process's times.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Callable, Iterable, Optional, Tuple

# Diagnostic knob: pretend this process's wall clock is off by this many ns (to exercise and
# demonstrate alignment on one machine, where all processes share one clock).
SKEW_ENV = "MINDSPEED_PROFILER_TRACER_CLOCK_SKEW_NS"


@dataclass(frozen=True)
class ClockAnchor:
    wall_ns: int
    mono_ns: int

    def to_wall(self, mono_ns: int) -> int:
        return self.wall_ns + (mono_ns - self.mono_ns)


def take_anchor() -> ClockAnchor:
    """Read wall and monotonic time back to back (plus the diagnostic skew, if set)."""
    skew = _env_skew()
    mono = time.monotonic_ns()
    wall = time.time_ns()
    return ClockAnchor(wall_ns=wall + skew, mono_ns=mono)


def _env_skew() -> int:
    raw = os.environ.get(SKEW_ENV, "").strip()
    if not raw:
        return 0
    try:
        return int(raw)
    except ValueError:
        return 0


@dataclass(frozen=True)
class OffsetEstimate:
    """offset_ns: add to the remote clock to get the reference clock. uncertainty_ns: half the RTT."""

    offset_ns: int
    uncertainty_ns: int
    rtt_ns: int
    samples: int


# One round trip: (reference time before, remote reading, reference time after).
Sample = Tuple[int, int, int]


def estimate_offset(samples: Iterable[Sample]) -> Optional[OffsetEstimate]:
    """Min-RTT midpoint estimate; None if there is no usable sample.

    The remote reading happened somewhere between t0 and t1 on the reference clock, so the true
    offset lies within +/- rtt/2 of `midpoint - remote`; the tightest sample bounds it best.
    """
    good = [(t1 - t0, t0, r, t1) for t0, r, t1 in samples if r is not None and t1 >= t0]
    if not good:
        return None
    rtt, t0, r, t1 = min(good)
    midpoint = t0 + rtt // 2
    return OffsetEstimate(offset_ns=midpoint - r, uncertainty_ns=(rtt + 1) // 2, rtt_ns=rtt, samples=len(good))


def measure_offset(
    remote_now: Callable[[], Optional[int]], local_now: Callable[[], int], rounds: int
) -> Optional[OffsetEstimate]:
    """Run `rounds` round trips of `remote_now` (a blocking call) and estimate the offset. A None
    reading (the remote side has no clock to read, e.g. no tracer) ends the rounds early."""
    samples: list[Sample] = []
    for _ in range(max(1, rounds)):
        t0 = local_now()
        r = remote_now()
        t1 = local_now()
        if r is None:
            break
        samples.append((t0, int(r), t1))
    return estimate_offset(samples)
