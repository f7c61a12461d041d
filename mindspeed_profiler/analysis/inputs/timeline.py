"""The cross-worker timeline: a merged timeline.json[.gz], or a directory of *.seg.jsonl segments
(merged here, in memory)."""
from __future__ import annotations

from pathlib import Path

from mindspeed_profiler.core import formats

from ..analyzers.stages import analyse_timeline, stage_spans
from mindspeed_profiler.analysis.pipeline.discover import Capture, not_a_regular_file, rel
from ..parsing.timeline_trace import read_timeline_runs
from . import InputKind, register_input


def _claim(root: Path, d: Path, names: list[str], claimed: set[str]) -> list[Capture]:
    """The segments (every run's spans: the source) when any holds data, else the merged file."""
    segments = [n for n in names if n.endswith(formats.SEGMENT_SUFFIX)]
    merged = [n for n in names if n.startswith("timeline.") and n.endswith((".json", ".json.gz"))]
    if not segments and not merged:
        return []
    claimed.update(merged)
    # a FIFO or a link to /dev/zero under a timeline name would hang the reader: reported, never opened
    odd = [c for n in segments + merged for c in [not_a_regular_file(root, d / n)] if c is not None]
    segments = [n for n in segments if (d / n).is_file()]
    merged = [n for n in merged if (d / n).is_file()]
    if not segments and not merged:
        return odd
    if any(_size(d / n) > 0 for n in segments):
        return odd + [Capture(path=rel(root, d), kind="timeline")]
    latest = [n for n in formats.TIMELINE_FILES if n in merged][:1] or merged[:1]
    return odd + [Capture(path=rel(root, d), kind="timeline", files=[rel(root, d / n) for n in latest])]


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def analyse(root: Path, cap: Capture, top_n: int, want_events: bool) -> tuple[dict, dict | None]:
    """The RL analysis of the timeline's latest run (or of `cap.run_id`, when the batch asks for one
    run); with several runs, each run's analysis is in `timeline_runs`, none mixed with another.
    With want_events (analysis.db), the second value is {"spans": every stage span of every run, with
    its run_id}: for the db only (summary.json keeps the Gantt's first spans)."""
    runs = read_timeline_runs(root / cap.path, [root / f for f in cap.files])
    if cap.run_id is not None:
        runs = [(rid, t) for rid, t in runs if rid == cap.run_id]
        if not runs:
            raise ValueError(f"no timeline of run {cap.run_id!r} here")
    rid, trace = runs[-1]
    out: dict = {"run_id": rid, "timeline": analyse_timeline(trace)}
    if len(runs) > 1:
        out["timeline_runs"] = [{"run_id": r, **analyse_timeline(t)} for r, t in runs]
    other = trace.get("otherData") if isinstance(trace.get("otherData"), dict) else {}
    out["warnings"] = [w for w in other.get("warnings") or [] if isinstance(w, str)]
    if not want_events:
        return out, None
    return out, {"spans": [{"run_id": r, **s} for r, t in runs for s in stage_spans(t)]}


register_input(InputKind("timeline", analyse, order=30, claim_files=_claim,
                         claims_file_root=lambda name: name.startswith(formats.TIMELINE_FILE)))
