"""The host memory watermark (`metrics.host_memory_watermark`): a share of the host memory this
process may use (its memory cgroup's limit, else the machine's: runtime/host_memory.host_limit). Its
resident memory reaching that line calls `on_cross` once; it is armed again only after falling below
REARM of the line, so a process hovering at the line writes one record, not one per check.

The check runs on the profiler's background thread (runtime/export_writer.py `every`, about every
0.5 s): the kernel's OOM killer sends SIGKILL, which leaves no chance to write anything, so the
record must be written before, by a thread that does not wait for the training loop. A check is one
read of /proc/self/statm (~6 us)."""
from __future__ import annotations

from typing import Any, Callable

from mindspeed_profiler.runtime.host_memory import host_limit, rss_bytes

REARM = 0.95   # armed again below this share of the line


class HostWatermark:
    """`check()` compares the resident size with the line (share x limit) and calls
    `on_cross(reading)` at a crossing; `reading`: share, line, limit and where it comes from, the
    resident size, the crossing's number."""

    def __init__(self, share: float, on_cross: Callable[[dict[str, Any]], None],
                 limit: int | None = None, source: str | None = None):
        if limit is None:
            limit, source, _ = host_limit()
        self.share, self.on_cross = share, on_cross
        self.limit, self.source = limit, source
        self.line = int(share * limit) if limit else None
        self.armed = True
        self.crossings = 0

    def check(self, rss: int | None = None) -> dict[str, Any] | None:
        """One check (`rss`: the resident size, read when not given); the reading when it crossed."""
        if self.line is None:
            return None
        rss = rss_bytes() if rss is None else rss
        if rss is None:
            return None
        if self.armed and rss >= self.line:
            self.armed = False
            self.crossings += 1
            reading = {"share": self.share, "line_bytes": self.line, "limit_bytes": self.limit,
                       "limit_source": self.source, "rss_bytes": rss, "crossing": self.crossings}
            self.on_cross(reading)
            return reading
        if not self.armed and rss < self.line * REARM:
            self.armed = True
        return None
