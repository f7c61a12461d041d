"""The cross-worker timeline: a merged timeline.json[.gz], or a directory of *.seg.jsonl segments
(merged here, in memory)."""
from __future__ import annotations

from pathlib import Path

from mindspeed_profiler import formats

from ..analyzers.stages import analyse_timeline
from ..discover import Capture, rel
from ..parsing.timeline_trace import read_timeline
from . import InputKind, register_input


def _claim(root: Path, d: Path, names: list[str], claimed: set[str]) -> list[Capture]:
    if not (any(n.startswith(formats.TIMELINE_FILE) for n in names) or any(n.endswith(formats.SEGMENT_SUFFIX) for n in names)):
        return []
    merged = [n for n in names if n in formats.TIMELINE_FILES]
    claimed.update(merged)
    return [Capture(path=rel(root, d), kind="timeline", files=[rel(root, d / n) for n in merged[:1]])]


def analyse(root: Path, cap: Capture, top_n: int, want_events: bool) -> tuple[dict, None]:
    trace = read_timeline(root / cap.path, [root / f for f in cap.files])
    return {"timeline": analyse_timeline(trace)}, None


register_input(InputKind("timeline", analyse, order=30, claim_files=_claim,
                         claims_file_root=lambda name: name.startswith(formats.TIMELINE_FILE)))
