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

from mindspeed_profiler.schedule import Window


@dataclass(frozen=True, kw_only=True)
class CaptureSpec(Window):
    """One capture's window (first / last recorded iteration, warmup, begin, active) plus naming."""

    save_dir: str  # <profile_save_path>/<stage or "all">
    worker_name: str  # <role>_rank<R>_step<A>-<B>[_c<K>]_<host>
    trace_basename: str  # <role>_rank<R>
    cfg: Any  # the IntegratedConfig


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
