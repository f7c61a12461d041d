"""Where flushed batches go: a local segment file, or a collector actor on the head node.

A sink gets already-encoded bytes (one or more JSON lines) from the flusher thread, never single
events. Errors raise to the recorder, which reports them once and keeps training going.
"""
from __future__ import annotations

import os
from typing import Any, Optional

from mindspeed_profiler.core.fileio import open_append


class FileSink:
    """Appends batches to `<dir>/<name>`; opened lazily so an idle tracer creates no file."""

    def __init__(self, directory: str, name: str):
        self.path = os.path.join(directory, name)
        self._fh = None

    def write(self, data: bytes) -> None:
        if self._fh is None:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            self._fh = open_append(self.path)   # a FIFO or a link there is refused, never waited on
        self._fh.write(data)
        self._fh.flush()  # into the page cache: survives a SIGKILL of this process

    def lost(self) -> bool:
        """True (once) when the open file was removed under us (its directory deleted mid-run):
        it is closed, and the next write starts a new file there (one fstat per flush)."""
        if self._fh is None:
            return False
        try:
            gone = os.fstat(self._fh.fileno()).st_nlink == 0
        except OSError:
            gone = True
        if gone:
            self.close()
        return gone

    def close(self) -> None:
        if self._fh is not None:
            try:
                self._fh.close()
            finally:
                self._fh = None

    def describe(self) -> str:
        return self.path


class CollectorSink:
    """Sends batches to a `TraceCollector` actor; one batch in flight at a time (backpressure).

    Each write first waits (in the flusher thread, never a user thread) for the previous batch to
    be acknowledged, so a dead collector is noticed at the next flush and reported.
    """

    def __init__(self, collector: Any, name: str, ack_timeout_s: float = 30.0):
        self._collector = collector
        self._name = name
        self._pending: Optional[Any] = None
        self._timeout = ack_timeout_s

    def _await_pending(self) -> None:
        if self._pending is not None:
            import ray

            ref, self._pending = self._pending, None
            ray.get(ref, timeout=self._timeout)

    def write(self, data: bytes) -> None:
        self._await_pending()
        self._pending = self._collector.write.remote(self._name, data)

    def close(self) -> None:
        self._await_pending()

    def describe(self) -> str:
        return f"collector:{self._name}"
