"""`offload()` / `onload()`: what a framework moves between the device and the host, marked where it
moves it (a span kind of its own on the timeline, as the weight sync's phases are):

    with offload(what="optimizer") as move:          # parameters, gradients, optimizer states to the host
        model.to("cpu"); ...
    with onload(nbytes=n, what="kv_cache"):          # and back before they are used
        ...

The bytes: `nbytes` when given (or set on the handle inside the block: `move.nbytes = n`), else the
device allocator's allocated bytes before and after the block (an offload frees what it moved, an
onload allocates it; another thread allocating meanwhile counts too), else unknown (a CPU). They go
to the innermost stage call open in this process (the tracker's `perf/offload_gb/<stage>`,
`perf/onload_gb/<stage>` and the stage-call lines) and to the span (category `memory_move`, args
`direction`, `bytes`, `what`). Cheap and never fatal: a bad `nbytes` is a ValueError naming it,
anything the device says wrong only leaves the bytes unknown.
"""
from __future__ import annotations

from typing import Any

from mindspeed_profiler.core import formats
from mindspeed_profiler.metrics import stage_memory
from mindspeed_profiler.metrics.device_memory import find_device
from mindspeed_profiler.tracing.api import trace_span

OFFLOAD, ONLOAD = "offload", "onload"


def _check_nbytes(nbytes: Any) -> int | None:
    if nbytes is None:
        return None
    if isinstance(nbytes, bool) or not hasattr(nbytes, "__index__") or nbytes.__index__() < 0:
        raise ValueError(f"nbytes={nbytes!r}: expected a non-negative integer (bytes moved) or None (measured "
                         "from the device allocator)")
    return nbytes.__index__()


class MemoryMove:
    """One offload / onload block (see the module docstring); `nbytes` may be set inside it."""

    __slots__ = ("direction", "nbytes", "what", "_dev", "_before", "_span", "_args")

    def __init__(self, direction: str, nbytes: int | None = None, what: str | None = None):
        self.direction, self.nbytes, self.what = direction, _check_nbytes(nbytes), what
        self._dev = self._before = None
        self._args: dict[str, Any] = {"direction": direction, "bytes": None, "what": what}
        self._span: Any = None

    def __enter__(self) -> "MemoryMove":
        if self.nbytes is None:
            self._dev = find_device()
            if self._dev is not None:
                try:
                    self._before = self._dev.current()[0]
                except Exception:
                    self._dev = None
        self._span = trace_span(self.direction if self.what is None else f"{self.direction}/{self.what}",
                                cat=formats.CAT_MEMORY_MOVE, args=self._args)
        self._span.__enter__()
        return self

    def __exit__(self, *exc: Any) -> bool:
        nbytes = _check_nbytes(self.nbytes) if exc[0] is None else None
        if nbytes is None and self._dev is not None and self._before is not None:
            try:
                after = self._dev.current()[0]
                nbytes = max(0, self._before - after if self.direction == OFFLOAD else after - self._before)
            except Exception:
                nbytes = None
        if nbytes is not None:
            self._args["bytes"] = nbytes
            call = stage_memory.moved(self.direction, nbytes)
            if call is not None:
                self._args["stage"] = call.stage
        self.nbytes = nbytes
        self._span.__exit__(*exc)
        return False


def offload(nbytes: int | None = None, what: str | None = None) -> MemoryMove:
    """Context manager: the block moves `nbytes` (None: measured) from the device to the host."""
    return MemoryMove(OFFLOAD, nbytes, what)


def onload(nbytes: int | None = None, what: str | None = None) -> MemoryMove:
    """Context manager: the block moves `nbytes` (None: measured) from the host to the device."""
    return MemoryMove(ONLOAD, nbytes, what)
