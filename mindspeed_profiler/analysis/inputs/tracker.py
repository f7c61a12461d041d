"""The metrics tracker's files (`<save>/metrics/<role>_rank<R>.jsonl`, metrics/tracker.py,
docs/metrics.md): one capture of kind `tracker` per worker, its rows as TRACKER_METRICS (one per
iteration and metric), what the advisor's MFU and memory rules read."""
from __future__ import annotations

from pathlib import Path

from mindspeed_profiler.core import formats

from ..analyzers.tracker_metrics import read_tracker_file
from mindspeed_profiler.analysis.pipeline.discover import Capture, not_a_regular_file, rel
from . import InputKind, register_input


def _claim(root: Path, d: Path, names: list[str], claimed: set[str]) -> list[Capture]:
    out = []
    for n in names:
        who = formats.parse_metrics_file_name(n)
        if n in claimed or who is None:
            continue
        path = d / n
        bad = not_a_regular_file(root, path)
        if bad is None and not _looks_like_tracker(path):
            continue   # another project's *_rank<R>.jsonl: left to the other kinds
        claimed.add(n)
        out.append(bad or Capture(path=rel(root, path), kind="tracker", files=[rel(root, path)], role=who[0], rank=who[1]))
    return out


def _looks_like_tracker(path: Path) -> bool:
    """The first line is one of the tracker's rows: an object with `iteration` and `timing_s/iteration`."""
    try:
        with open(path, "rb") as fh:
            first = fh.readline(1 << 16)
    except OSError:
        return False
    return b'"iteration"' in first and b'"timing_s/iteration"' in first


def analyse(root: Path, cap: Capture, top_n: int, want_events: bool) -> tuple[dict, None]:
    return read_tracker_file(root / cap.files[0]), None


register_input(InputKind("tracker", analyse, order=33, claim_files=_claim))
