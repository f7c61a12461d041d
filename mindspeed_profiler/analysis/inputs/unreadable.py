"""What discovery found but cannot read (an unlistable directory, a broken link, a FIFO): each is
reported as a failed capture with the reason, never opened."""
from __future__ import annotations

from pathlib import Path

from mindspeed_profiler.analysis.pipeline.discover import UNREADABLE, Capture
from . import InputKind, register_input


def analyse(root: Path, cap: Capture, top_n: int, want_events: bool) -> tuple[dict, None]:
    raise OSError(cap.warnings[-1] if cap.warnings else "unreadable")


register_input(InputKind(UNREADABLE, analyse, order=1000))
