"""The tasks `analyse DIR --ray` runs on each node (ray_batch.py is the driver): discovery of DIR
as the node sees it, the timeline segments' read, the input kinds' prepare step and one capture's
analysis, each answering in a pickled, compressed blob. Ray itself is imported only to name the node."""
from __future__ import annotations

import hashlib
import os
import pickle
import socket
import sys
import zlib
from pathlib import Path
from typing import Any, Callable

from mindspeed_profiler.core import formats

from mindspeed_profiler.analysis.pipeline.collect import prepare, run_captures
from mindspeed_profiler.analysis.pipeline.discover import Capture, discover
from mindspeed_profiler.analysis.pipeline.pool import Limits


def resolve_dir(dir_arg: str, cwd: str) -> Path:
    """DIR as a node sees it: `~` and `$VARS` expanded there; a relative path is taken from the
    directory the driver runs in (the same absolute path on every node)."""
    p = os.path.expanduser(os.path.expandvars(str(dir_arg)))
    return Path(p if os.path.isabs(p) else os.path.join(cwd, p))


def _this_node() -> dict:
    import ray

    return {"node_id": ray.get_runtime_context().get_node_id(), "host": socket.gethostname()}


def _pack(obj: Any) -> bytes:
    """What a node task sends back: pickled and zlib-compressed (level 6: a GPU capture's summary of
    85 KB in 2 ms to 11.5 KB; level 1 leaves 14.5 KB; lzma / bz2 gain 10% more for 1.5-12x the time)."""
    return zlib.compress(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL), 6)


def unpack(data: bytes) -> Any:
    return pickle.loads(zlib.decompress(data))


def _stat(p: Path) -> tuple[int, int]:
    try:
        st = p.stat()
        return st.st_size, st.st_mtime_ns
    except OSError:
        return -1, -1


def fingerprint(base: Path, cap: Capture) -> str:
    """What tells a directory several nodes see (shared storage: same sizes and times) from
    different captures at the same relative path on several nodes' own disks."""
    entries = [("f", f, *_stat(base / f)) for f in cap.files]
    d = base / cap.path
    if d.is_dir():
        try:
            with os.scandir(d) as it:
                for e in it:
                    size, mtime = _stat(Path(e.path))
                    entries.append(("d", e.name, size if e.is_file() else 0, mtime))
        except OSError:
            pass
    return hashlib.blake2b(repr(sorted(entries)).encode("utf-8", "surrogateescape"), digest_size=12).hexdigest()


def _segment_names(d: Path) -> list[str]:
    try:
        return sorted(n for n in os.listdir(d) if n.endswith(formats.SEGMENT_SUFFIX) and (d / n).is_file())
    except OSError:
        return []


def _trace_bytes(base: Path, cap: Capture) -> int:
    if cap.files:
        return sum(max(0, _stat(base / f)[0]) for f in cap.files)
    if cap.kind == "timeline":
        d = base / cap.path
        return sum(max(0, _stat(d / n)[0]) for n in _segment_names(d))
    return 0


def discover_on_node(dir_arg: str, cwd: str) -> bytes:
    """A node's discovery task: what DIR holds there, with a fingerprint and the size of each capture."""
    out: dict = {**_this_node(), "dir": None, "base": None, "caps": []}
    path = resolve_dir(dir_arg, cwd)
    out["dir"] = str(path)
    if not path.exists():
        return _pack(out)
    base = path if path.is_dir() else path.parent
    out["base"] = str(base)
    for c in discover(path):
        out["caps"].append({"cap": c.to_dict(), "fp": fingerprint(base, c), "bytes": _trace_bytes(base, c)})
    return _pack(out)


def read_segments_on_node(base: str, rel_dir: str) -> bytes:
    """The segment files of one timeline directory of this node: {name: bytes} (they are small)."""
    d = Path(base) / rel_dir
    out = {}
    for n in _segment_names(d):
        try:
            out[n] = (d / n).read_bytes()
        except OSError:
            pass   # gone since the discovery: the merge goes on without it
    return _pack(out)


def prepare_on_node(base: str, cap_dicts: list[dict], jobs: int, export_type: str, python: str | None) -> bytes:
    """The input kinds' prepare step for this node's captures (e.g. raw Ascend parsing with torch_npu
    + CANN when they work here): the captures as prepared, {path: why it stays unparsed}, the log."""
    caps = [Capture(**d) for d in cap_dicts]
    lines: list[str] = []
    reasons = prepare(Path(base), caps, jobs, export_type, lines.append, python or sys.executable)
    return _pack({"caps": [c.to_dict() for c in caps], "reasons": reasons, "log": lines})


def analyse_on_node(base: str, cap_dict: dict, top_n: int, want_events: bool, fn: Callable, limits: Limits) -> bytes:
    """One capture, on the node that holds it, under the per-capture limits exactly as a local
    analysis with one job (time limit here; a suspected decompression bomb in a memory-capped child)."""
    res = run_captures(Path(base), [Capture(**cap_dict)], 1, top_n, want_events, False, fn, limits)[0]
    return _pack(res)
