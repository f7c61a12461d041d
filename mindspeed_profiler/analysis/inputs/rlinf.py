"""RLinf's tracer output (`trace_events.jsonl`): read into our timeline format
(parsing/rlinf_trace.py) and analysed like our own timeline: iterations, stages per worker,
overlap, critical path, slow ranks."""
from __future__ import annotations

from pathlib import Path

from ..analyzers.stages import analyse_timeline
from mindspeed_profiler.analysis.pipeline.discover import Capture, not_a_regular_file, rel
from ..parsing.rlinf_trace import RLINF_TRACE_FILE, looks_like_rlinf, read_rlinf_events, to_timeline
from . import InputKind, register_input


def _claim(root: Path, d: Path, names: list[str], claimed: set[str]) -> list[Capture]:
    out = []
    for n in names:
        if n in claimed or not n.endswith(".jsonl") or n.endswith(".seg.jsonl"):
            continue
        path = d / n
        bad = not_a_regular_file(root, path)
        if bad is None and n != RLINF_TRACE_FILE and not looks_like_rlinf(path):
            continue
        claimed.add(n)
        out.append(bad or Capture(path=rel(root, path), kind="rlinf_timeline", files=[rel(root, path)]))
    return out


def analyse(root: Path, cap: Capture, top_n: int, want_events: bool) -> tuple[dict, None]:
    events, warnings = read_rlinf_events(root / cap.files[0])
    if not events:
        raise ValueError("no events: not an RLinf trace_events.jsonl")
    trace, more = to_timeline(events)
    return {"timeline": analyse_timeline(trace), "warnings": warnings + more}, None


register_input(InputKind("rlinf_timeline", analyse, order=35, claim_files=_claim,
                         claims_file_root=lambda name: name == RLINF_TRACE_FILE))
