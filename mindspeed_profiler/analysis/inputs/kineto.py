"""Kineto JSON traces: `torch` = one of our torch capture directories (*_pt/), `kineto` = a loose
*.json[.gz] trace anywhere (torch.profiler's tensorboard_trace_handler output, HTA's data...)."""
from __future__ import annotations

import contextlib
import gzip
import hashlib
import os
from pathlib import Path

from mindspeed_profiler.core import formats

from ..analyzers.memory_peaks import kineto_trace_memory, table_memory, with_capacity
from ..analyzers.classify import classified
from ..analyzers.ops import op_rows
from ..analyzers.trace_summary import summarise_classified
from mindspeed_profiler.analysis.pipeline.discover import (
    Capture,
    keep_regular,
    not_a_regular_file,
    read_identity,
    rel,
    walk,
)
from ..parsing import jsonscan, split_parse
from ..pipeline import forked
from ..parsing.kineto_trace import event_columns, read_kineto_trace
from . import InputKind, register_input
from .snapshots import snapshot_memory

FORK_MEMORY_MIN = 5_000   # [memory] records from which the memory block is worth a forked child (~10 ms)
FORK_OPS_MIN = 50_000     # complete events from which the op rows are worth a forked child (~15 ms)


def is_trace_json(name: str) -> bool:
    return (name.endswith((".json", ".json.gz")) and name not in formats.NOT_TRACE_FILES
            and not name.startswith("profiler_info") and not name.startswith("."))


def analyse_trace_file(path: Path, top_n: int, want_events: bool) -> tuple[dict, dict | None]:
    trace = read_kineto_trace(path)
    memory = None
    if trace.events.n_memory:   # profile_memory=True
        tm = trace.memory
        # from the one parse; read once more only where its rows are not the raw X events (rare).
        # On a core left idle (a lone capture, -j 2 or more) a forked child computes it meanwhile.
        memory = (forked.start(table_memory, trace.events, tm, top_n,
                               fork=split_parse.HELPERS > 0 and trace.events.n_memory >= FORK_MEMORY_MIN)
                  if tm is not None and tm.raw_ts is not None else forked.start(kineto_trace_memory, path, top_n, fork=False))
    ct = classified(trace.events)
    # the op rows (the summary's largest part, ~40% of it) by a forked child on the core the memory
    # block leaves idle (issue 34: -25 ms on the MTIA trace's 0.07 s summary)
    core_taken = memory is not None and memory.pid is not None
    ops = forked.start(op_rows, ct, fork=split_parse.HELPERS > 0 and not core_taken and len(ct.ev) >= FORK_OPS_MIN)
    with memory or contextlib.nullcontext(), ops:
        out = summarise_classified(ct, top_n, ops_of=lambda _: ops.result())
        if memory is not None:
            out["memory_records"] = memory.result()
            out["warnings"] = out.get("warnings", []) + out["memory_records"]["warnings"]
    if trace.distributed is not None:
        out["distributed"] = trace.distributed
    if trace.warnings:
        out["warnings"] = out.get("warnings", []) + trace.warnings
    if trace.devices:
        out["device_properties"] = trace.devices
        if out.get("memory_records"):
            with_capacity(out["memory_records"]["devices"], trace.devices)
    return out, event_columns(trace.events) if want_events else None


def _claim_capture_dir(root: Path, d: Path) -> Capture | None:
    if formats.capture_format_of_dir(d.name) != "kineto":
        return None
    cap = Capture(path=rel(root, d), kind="torch")
    read_identity(cap, root, d)
    listed = cap.meta.get("trace_files") if cap.meta else None
    if isinstance(listed, list) and listed and all(isinstance(f, str) and f for f in listed):
        inside = [f for f in listed if _inside(d, d / f)]   # metadata is data: never a path out of the capture
        if len(inside) < len(listed):
            cap.warnings.append(f"trace_files lists {len(listed) - len(inside)} path(s) outside the capture directory: ignored")
        cap.files = [rel(root, p) for p in keep_regular(root, cap, [_compressed_if_gone(cap, d / f) for f in inside])]
    else:
        found = sorted(where / n for where, _, names in walk(d) for n in names   # (rglob recursed per level)
                       if is_trace_json(n) or n.endswith(formats.MEMORY_SNAPSHOT_SUFFIX))
        cap.files = [rel(root, p) for p in keep_regular(root, cap, found)]
    return cap


def _compressed_if_gone(cap: Capture, path: Path) -> Path:
    """A listed raw trace that is gone while its `.gz` is there: the export was interrupted after
    the compression (the .gz is renamed into place whole, then the raw removed) and before the
    metadata was rewritten; the .gz is the trace (said in a warning)."""
    gz = path.with_name(path.name + ".gz")
    if path.name.endswith(".json") and not os.path.lexists(path) and gz.is_file():
        cap.warnings.append(f"{path.name} is listed but gone; {gz.name} read instead (the export was interrupted "
                            "after compressing it, before the metadata was rewritten)")
        return gz
    return path


def _inside(directory: Path, path: Path) -> bool:
    """Whether `path` (links resolved) lies inside `directory`."""
    try:
        return Path(os.path.realpath(path)).is_relative_to(os.path.realpath(directory))
    except (OSError, ValueError):
        return False


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
            cap = Capture(path=rel(root, d / n), kind="kineto", files=[rel(root, d / n)])
            twin = n + ".gz"   # the same trace, compressed beside it: analysed once, said so
            if twin in names and twin not in claimed and os.path.isfile(d / twin):
                if same_content(d / n, d / twin):
                    claimed.add(twin)
                    cap.warnings.append(f"{twin} holds the same trace: analysed once (here)")
                else:
                    cap.warnings.append(f"{twin} has the same name but other content: both analysed")
            out.append(cap)
    return out


def same_content(plain: Path, gz: Path) -> bool:
    """Whether a .json and a .json.gz hold the same bytes (sizes first, then a streamed hash)."""
    try:
        if plain.stat().st_size != jsonscan.expanded_size(gz):
            return False
        return _digest(plain, open) == _digest(gz, gzip.open)
    except (OSError, EOFError, gzip.BadGzipFile):
        return False


def _digest(path: Path, opener) -> bytes:
    h = hashlib.sha1()
    with opener(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.digest()


def analyse(root: Path, cap: Capture, top_n: int, want_events: bool) -> tuple[dict, dict | None]:
    if (cap.meta or {}).get("status") == "recording":
        raise ValueError(f"the capture was never finished: it started at {cap.meta.get('start_time')} and its worker "
                           "stopped before exporting it (killed, crashed, or still running)")
    if (cap.meta or {}).get("status") == "held":
        raise ValueError("the capture was recorded but never written: export_after_run holds torch's session until "
                         "the run ends, and its process ended first (killed, crashed, or still running)")
    if not cap.files:
        raise FileNotFoundError("no Kineto trace file (*.json / *.json.gz) in the capture")
    # a capture may hold several traces (one per export); the largest is the capture
    paths = [root / f for f in cap.files]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        raise FileNotFoundError(f"listed trace file missing (or not a regular file): {missing[0]}")
    traces = [p for p in paths if is_trace_json(p.name)]
    if not traces:
        raise FileNotFoundError("no Kineto trace file (*.json / *.json.gz) in the capture")
    out, events = analyse_trace_file(max(traces, key=lambda p: p.stat().st_size), top_n, want_events)
    dist = out.get("distributed") or {}
    if cap.rank is None and isinstance(dist.get("rank"), int):
        out["rank"] = dist["rank"]
    snapshots = [p for p in paths if p.name.endswith(formats.MEMORY_SNAPSHOT_SUFFIX)]
    if snapshots:
        memory, warning = snapshot_memory(root, snapshots[0], top_n)
        if memory:
            out["memory"] = memory
        if warning:
            out.setdefault("warnings", []).append(warning)
    return out, events


register_input(InputKind("torch", analyse, order=20, claim_dir=_claim_capture_dir))
register_input(InputKind("kineto", analyse, order=90, claim_files=_claim_loose_traces))
