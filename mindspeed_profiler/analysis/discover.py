"""Find everything analysable under a directory (any depth) and say what kind it is."""
from __future__ import annotations

import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

import orjson

META_FILE = "mindspeed_profiler_meta.json"
ASCEND_TEXT = ("trace_view.json", "kernel_details.csv", "step_trace_time.csv")
ASCEND_SIDE_FILES = {"operator_details.csv", "op_statistic.csv", "api_statistic.csv", "communication.json",
                     "communication_matrix.json", "memory_record.csv", "operator_memory.csv",
                     "npu_module_mem.csv", "data_preprocess.csv", "l2_cache.csv", "op_summary.csv"}
NOT_TRACES = {META_FILE, "profiler_metadata.json", "run.json", "summary.json", "profiler_info.json",
              "cluster_communication.json", "cluster_communication_matrix.json", "package.json"}
CLUSTER_FILE = "cluster_step_trace_time.csv"
NAME_RE = re.compile(r"^(?P<role>.+?)_rank(?P<rank>\d+)_step(?P<a>\d+)-(?P<b>\d+)(?:_c\d+)?_")
KINDS = ("torch", "kineto", "ascend", "ascend_raw", "timeline", "cluster", "unreadable")


@dataclass
class Capture:
    path: str                  # relative to the root ("." for the root itself)
    kind: str                  # one of KINDS
    files: list[str] = field(default_factory=list)   # relative to the root
    role: str | None = None
    rank: int | None = None
    stage: str | None = None
    step_range: list[int] | None = None   # [first, last] iteration, from the metadata / name
    meta: dict | None = None
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


def _is_trace_json(name: str) -> bool:
    return (name.endswith((".json", ".json.gz")) and name not in NOT_TRACES
            and not name.startswith("profiler_info") and not name.startswith("."))


def _text(v) -> str | None:
    return None if v is None else v if isinstance(v, str) else str(v)


def _rel(root: Path, p: Path) -> str:
    r = os.path.relpath(p, root)
    return r


def _identity(cap: Capture, root: Path, d: Path) -> None:
    """Fill role / rank / stage / steps from our metadata, else from the directory name."""
    meta_path = d / META_FILE
    if meta_path.is_file():
        try:
            meta = orjson.loads(meta_path.read_bytes())
            if not isinstance(meta, dict):
                raise ValueError("not a JSON object")
            cap.meta = meta
            # a damaged file must not leak odd types into the tables (a list as a stage name...)
            cap.role = _text(meta.get("role"))
            r = meta.get("rank")
            cap.rank = r if isinstance(r, int) and not isinstance(r, bool) else None
            cap.stage = _text(meta.get("stage"))
            st = meta.get("steps")
            cap.step_range = (list(st) if isinstance(st, list) and len(st) == 2
                              and all(isinstance(x, int) and not isinstance(x, bool) for x in st) else None)
        except Exception as exc:  # noqa: BLE001 - a bad meta file is reported, not fatal
            cap.warnings.append(f"{_rel(root, meta_path)}: unreadable metadata ({type(exc).__name__}: {exc})")
    m = NAME_RE.match(d.name)
    if m:
        cap.role = cap.role or m["role"]
        cap.rank = cap.rank if cap.rank is not None else int(m["rank"])
        cap.step_range = cap.step_range or [int(m["a"]), int(m["b"])]
    if cap.stage is None and d.parent != root:  # <save_path>/<stage or "all">/<capture>
        cap.stage = d.parent.name


def discover(root: Path, skip_dirs: tuple[str, ...] = ("analysis",)) -> list[Capture]:
    root = Path(root)
    if root.is_file():
        name = root.name
        if name == CLUSTER_FILE:
            return [Capture(path=name, kind="cluster", files=[name])]
        if name.startswith("timeline.json"):
            return [Capture(path=name, kind="timeline", files=[name])]
        return [Capture(path=name, kind="kineto", files=[name])]
    found: list[Capture] = []
    seen: set[str] = {os.path.realpath(root)}

    def unreadable(err: OSError) -> None:   # a directory we cannot list is reported, not skipped
        p = Path(err.filename) if err.filename else root
        found.append(Capture(path=_rel(root, p), kind="unreadable",
                             warnings=[f"cannot list directory: {type(err).__name__}: {err.strerror or err}"]))

    # symlinked directories are followed (captures gathered by links), each real directory once
    for dirpath, dirnames, filenames in os.walk(root, onerror=unreadable, followlinks=True):
        d = Path(dirpath)
        rel = _rel(root, d)
        keep = []
        for x in sorted(dirnames):
            if x.startswith(".") or (d == root and x in skip_dirs):
                continue
            real = os.path.realpath(d / x)
            if real in seen:
                continue
            seen.add(real)
            keep.append(x)
        dirnames[:] = keep
        filenames = sorted(filenames)
        if d.name.endswith("_ascend_pt"):
            dirnames[:] = []
            cap = Capture(path=rel, kind="ascend")
            _identity(cap, root, d)
            out = d / "ASCEND_PROFILER_OUTPUT"
            text = [out / n for n in ASCEND_TEXT if (out / n).is_file()]
            dbs = sorted(out.glob("ascend_pytorch_profiler*.db")) if out.is_dir() else []
            if text or dbs:
                cap.files = [_rel(root, p) for p in (text or dbs)]
            else:
                cap.kind = "ascend_raw"
            found.append(cap)
            continue
        if d.name.endswith("_pt"):
            dirnames[:] = []
            cap = Capture(path=rel, kind="torch")
            _identity(cap, root, d)
            listed = (cap.meta or {}).get("trace_files") if cap.meta else None
            if isinstance(listed, list) and listed and all(isinstance(f, str) and f for f in listed):
                cap.files = [_rel(root, d / f) for f in listed]
            else:
                cap.files = [_rel(root, p) for p in sorted(d.rglob("*")) if p.is_file() and _is_trace_json(p.name)]
            found.append(cap)
            continue
        claimed: set[str] = set()
        text = [n for n in ASCEND_TEXT if n in filenames and os.path.isfile(d / n)]
        if text:  # a loose ASCEND_PROFILER_OUTPUT (or a copy of its files)
            cap = Capture(path=rel, kind="ascend", files=[_rel(root, d / n) for n in text])
            if d.name == "ASCEND_PROFILER_OUTPUT":
                cap.stage = None
            found.append(cap)
            claimed.update(text)
            claimed.update(n for n in filenames if n in ASCEND_SIDE_FILES)
        if any(n.startswith("timeline.json") for n in filenames) or any(n.endswith(".seg.jsonl") for n in filenames):
            merged = [n for n in filenames if n in ("timeline.json", "timeline.json.gz")]
            found.append(Capture(path=rel, kind="timeline", files=[_rel(root, d / n) for n in merged[:1]]))
            claimed.update(merged)
        for n in filenames:
            if n in claimed:
                continue
            if (n == CLUSTER_FILE or _is_trace_json(n)) and not os.path.isfile(d / n):
                # a broken link, a FIFO (reading it would block), a socket...: reported, never opened
                why = "broken symbolic link" if os.path.islink(d / n) and not os.path.exists(d / n) else "not a regular file"
                found.append(Capture(path=_rel(root, d / n), kind="unreadable", warnings=[why]))
                continue
            if n == CLUSTER_FILE:
                found.append(Capture(path=_rel(root, d / n), kind="cluster", files=[_rel(root, d / n)]))
            elif _is_trace_json(n) and not n.startswith("timeline"):
                found.append(Capture(path=_rel(root, d / n), kind="kineto", files=[_rel(root, d / n)]))
    return found
