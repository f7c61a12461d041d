"""msprof-analyze's cluster_step_trace_time.csv: per-rank computing / communication / free time."""
from __future__ import annotations

from pathlib import Path

from mindspeed_profiler import formats

from ..discover import Capture, not_a_regular_file, rel
from ..parsing.ascend_files import read_step_trace_time
from . import InputKind, register_input


def _claim(root: Path, d: Path, names: list[str], claimed: set[str]) -> list[Capture]:
    n = formats.CLUSTER_STEP_TRACE_FILE
    if n not in names or n in claimed:
        return []
    claimed.add(n)
    return [not_a_regular_file(root, d / n) or Capture(path=rel(root, d / n), kind="cluster", files=[rel(root, d / n)])]


def analyse(root: Path, cap: Capture, top_n: int, want_events: bool) -> tuple[dict, None]:
    path = root / cap.files[0]
    rows = read_step_trace_time(path)
    ranks = [r for r in rows if (r.get("type") or "").lower() == "rank"]
    if not ranks:
        raise ValueError(f"{path.name}: no per-rank rows (Type == 'rank')")
    for r in ranks:
        r["rank"] = int(float(r["index"]))
    return {"ranks": ranks, "stages": [r for r in rows if (r.get("type") or "").lower() == "stage"]}, None


register_input(InputKind("cluster", analyse, order=80, claim_files=_claim,
                         claims_file_root=lambda name: name == formats.CLUSTER_STEP_TRACE_FILE))
