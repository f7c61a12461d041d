"""The small interface every capture backend implements.

The profiler core (profiler.py) owns gating, naming, metadata and error handling; a backend only
knows how to run one capture: start it at the beginning of iteration `spec.begin`, advance it at
the end of each iteration, stop it and say which files it wrote. Every method may raise: the core
catches, records and abandons the capture.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class CaptureSpec:
    save_dir: str  # <profile_save_path>/<stage or "all">
    worker_name: str  # <role>_rank<R>_step<A>-<B>[_c<K>]_<host>
    trace_basename: str  # <role>_rank<R>
    first: int  # first recorded iteration (1-based)
    last: int  # last recorded iteration (inclusive)
    warmup: int  # iterations before `first` run under the profiler without recording
    cfg: Any  # the IntegratedConfig

    @property
    def begin(self) -> int:
        return self.first - self.warmup

    @property
    def active(self) -> int:
        return self.last - self.first + 1


class CaptureHandle(ABC):
    """One capture. Call order: start(), step() at the end of each iteration, stop(), export()."""

    directory: Path | None = None  # the capture directory, once it exists

    @abstractmethod
    def start(self) -> None: ...

    @abstractmethod
    def step(self) -> None: ...

    @abstractmethod
    def stop(self) -> None: ...

    @abstractmethod
    def export(self) -> list[Path]:
        """Finish writing; return the trace files written (may be empty)."""

    def abandon(self) -> None:
        """Best-effort cleanup after a failure; must not raise."""
        try:
            self.stop()
        except Exception:
            pass


class Backend(ABC):
    name: str  # "torch" | "npu"
    device: str  # "cpu" | "cuda" | "npu"

    @abstractmethod
    def open(self, spec: CaptureSpec) -> CaptureHandle: ...

    def options(self, cfg: Any) -> dict[str, Any]:
        """The backend options a config turns into (for the metadata)."""
        return {}
