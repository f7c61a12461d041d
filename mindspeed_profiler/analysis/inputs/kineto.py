"""Kineto JSON traces: `torch` = one of our torch capture directories (*_pt/), `kineto` = a loose
*.json[.gz] trace anywhere (torch.profiler's tensorboard_trace_handler output, HTA's data...)."""
from __future__ import annotations

from pathlib import Path

from mindspeed_profiler import formats

from ..analyzers.trace_summary import summarise
from ..discover import Capture, not_a_regular_file, read_identity, rel
from ..parsing.kineto_trace import event_columns, read_kineto_trace
from . import InputKind, register_input


def is_trace_json(name: str) -> bool:
    return (name.endswith((".json", ".json.gz")) and name not in formats.NOT_TRACE_FILES
            and not name.startswith("profiler_info") and not name.startswith("."))


def analyse_trace_file(path: Path, top_n: int, want_events: bool) -> tuple[dict, dict | None]:
    trace = read_kineto_trace(path)
    out = summarise(trace.events, top_n)
    if trace.distributed is not None:
        out["distributed"] = trace.distributed
    return out, event_columns(trace.events) if want_events else None


def _claim_capture_dir(root: Path, d: Path) -> Capture | None:
    if formats.capture_format_of_dir(d.name) != "kineto":
        return None
    cap = Capture(path=rel(root, d), kind="torch")
    read_identity(cap, root, d)
    listed = cap.meta.get("trace_files") if cap.meta else None
    if isinstance(listed, list) and listed and all(isinstance(f, str) and f for f in listed):
        cap.files = [rel(root, d / f) for f in listed]
    else:
        cap.files = [rel(root, p) for p in sorted(d.rglob("*")) if p.is_file() and is_trace_json(p.name)]
    return cap


def _claim_loose_traces(root: Path, d: Path, names: list[str], claimed: set[str]) -> list[Capture]:
    out = []
    for n in names:
        if n in claimed or not is_trace_json(n):
            continue
        claimed.add(n)
        bad = not_a_regular_file(root, d / n)
        if bad is not None:
            out.append(bad)
        elif not n.startswith("timeline"):
            out.append(Capture(path=rel(root, d / n), kind="kineto", files=[rel(root, d / n)]))
    return out


def analyse(root: Path, cap: Capture, top_n: int, want_events: bool) -> tuple[dict, dict | None]:
    if not cap.files:
        raise FileNotFoundError("no Kineto trace file (*.json / *.json.gz) in the capture")
    # a capture may hold several traces (one per export); the largest is the capture
    paths = [root / f for f in cap.files]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        raise FileNotFoundError(f"listed trace file missing (or not a regular file): {missing[0]}")
    out, events = analyse_trace_file(max(paths, key=lambda p: p.stat().st_size), top_n, want_events)
    dist = out.get("distributed") or {}
    if cap.rank is None and isinstance(dist.get("rank"), int):
        out["rank"] = dist["rank"]
    return out, events


register_input(InputKind("torch", analyse, order=20, claim_dir=_claim_capture_dir))
register_input(InputKind("kineto", analyse, order=90, claim_files=_claim_loose_traces))
