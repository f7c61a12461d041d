"""What one torch_npu release offers, as far as the npu backend calls it: accepted keywords, enum
members and the instance attributes of `profile`.

It comes from snapshots of the real torch-npu wheels (mindspeed_profiler/data/torch_npu-<version>.json,
one per release line, made by tools/extract_torch_npu_signatures.py from the wheels' sources) and,
on a machine with torch_npu, from the installed functions' own signatures (`inspect`; torch_npu's
wrappers keep them with functools.wraps): `NpuApi.from_snapshot`, `installed_api`.
torch_npu is imported lazily (`import_torch_npu`): without CANN the import raises more than ImportError.
"""
from __future__ import annotations

import functools
import inspect
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

DATA_DIR = Path(__file__).resolve().parent.parent / "data"
INDEX_FILE = DATA_DIR / "torch_npu_index.json"

# the torch_npu functions we call, by their public dotted names (the snapshots' keys)
PROFILE = "torch_npu.profiler.profile.__init__"
EXPERIMENTAL = "torch_npu.profiler._ExperimentalConfig.__init__"
HANDLER = "torch_npu.profiler.tensorboard_trace_handler"
SCHEDULE = "torch_npu.profiler.schedule.__init__"
ANALYSE = "torch_npu.profiler.profiler.analyse"
MARK = "torch_npu.npu.mstx.mark"
RANGE_START = "torch_npu.npu.mstx.range_start"
RANGE_END = "torch_npu.npu.mstx.range_end"
_OBJECTS = {  # public name -> attribute path from the torch_npu module
    PROFILE: ("profiler", "profile", "__init__"),
    EXPERIMENTAL: ("profiler", "_ExperimentalConfig", "__init__"),
    HANDLER: ("profiler", "tensorboard_trace_handler"),
    SCHEDULE: ("profiler", "schedule", "__init__"),
    ANALYSE: ("profiler", "profiler", "analyse"),
    MARK: ("npu", "mstx", "mark"),
    RANGE_START: ("npu", "mstx", "range_start"),
    RANGE_END: ("npu", "mstx", "range_end"),
}
ENUMS = ("ProfilerLevel", "AiCMetrics", "ExportType", "ProfilerActivity")
STEP_OFFSET_ATTR = "_step_num_offset"


def import_torch_npu() -> Any:
    """torch_npu, or raise the import error (callers guard)."""
    import torch_npu  # noqa: F401  (lazy on purpose: never at module top level)

    return torch_npu


_VERSION = re.compile(r"^(\d+)\.(\d+)(?:\.(\d+))?(?:\.?post(\d+))?")


def version_key(version: str | None) -> tuple[int, ...]:
    """Sort key of a torch-npu release number (2.7.1 < 2.7.1.post2 < 2.7.1.post11 < 2.8.0);
    a local part (+git...) is ignored; an unreadable one sorts first."""
    m = _VERSION.match((version or "").split("+")[0].strip())
    if not m:
        return (-1,)
    major, minor, patch, post = m.groups()
    return (int(major), int(minor), int(patch or 0), int(post or -1) + 1)


@functools.lru_cache(maxsize=None)
def snapshot_index() -> dict[str, Any]:
    """data/torch_npu_index.json: {"order": [oldest ... newest], "versions": {v: {"file", ...}}}
    (empty when missing: then only inspection tells what a release accepts)."""
    try:
        return json.loads(INDEX_FILE.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {"order": [], "versions": {}}


def snapshot_versions() -> list[str]:
    """The torch-npu releases we have snapshots of, oldest first."""
    return list(snapshot_index()["order"])


@functools.lru_cache(maxsize=None)
def load_snapshot(version: str) -> dict[str, Any]:
    """The snapshot of one release (shared: do not modify it)."""
    entry = snapshot_index()["versions"][version]
    return json.loads((DATA_DIR / entry["file"]).read_text(encoding="utf-8"))


def nearest_snapshot(version: str | None) -> str | None:
    """The snapshot to assume for `version`: the same release, else the newest snapshot not newer
    than it (of its own line when there is one), else the oldest; the newest when `version` is
    unknown. None when there are no snapshots."""
    order = snapshot_versions()
    if not order:
        return None
    if version is None:
        return order[-1]
    base = version.split("+")[0].strip()
    if base in order:
        return base
    key = version_key(base)
    if key == (-1,):
        return order[-1]
    older = [v for v in order if version_key(v) <= key]
    same_line = [v for v in older if version_key(v)[:2] == key[:2]]
    return (same_line or older or order[:1])[-1]


def _keywords_of_params(params: list[tuple[str, str]]) -> frozenset[str] | None:
    """The keywords a call accepts, from (name, kind) pairs; None = any keyword (**kwargs)."""
    if params and params[0][0] == "self":
        params = params[1:]
    if any(kind == "VAR_KEYWORD" for _, kind in params):
        return None
    return frozenset(name for name, kind in params if kind in ("POSITIONAL_OR_KEYWORD", "KEYWORD_ONLY"))


_OPAQUE = object()  # a signature that says nothing: (*args, **kwargs) of a wrapper without functools.wraps


def _inspected_keywords(obj: Any) -> Any:
    """The keywords `obj` accepts, None for any, or _OPAQUE when its signature cannot tell."""
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return _OPAQUE
    params = [(p.name, p.kind.name) for p in sig.parameters.values()]
    if params and params[0][0] == "self":
        params = params[1:]
    if params and all(kind in ("VAR_POSITIONAL", "VAR_KEYWORD") for _, kind in params):
        return _OPAQUE
    return _keywords_of_params(params)


@dataclass(frozen=True)
class NpuApi:
    """What one torch_npu release offers, as far as we call it.

    keywords: public function name -> the keyword names it accepts (None: any keyword);
    a function missing from `keywords` and listed in `absent` does not exist in the release.
    enums: enum class -> its member names (absent class: not a key).
    attributes: the instance attributes `profile.__init__` sets (None: not known).
    """

    version: str | None
    keywords: Mapping[str, frozenset[str] | None]
    absent: frozenset[str] = frozenset()
    enums: Mapping[str, frozenset[str]] = field(default_factory=dict)
    attributes: frozenset[str] | None = None
    source: str = "snapshot"  # where this description comes from (recorded in the metadata)

    def has(self, function: str) -> bool:
        return function not in self.absent

    def accepts(self, function: str, keyword: str) -> bool:
        if function in self.absent:
            return False
        accepted = self.keywords.get(function)
        return accepted is None or keyword in accepted

    def has_member(self, enum: str, member: str) -> bool:
        if enum in self.absent:
            return False
        members = self.enums.get(enum)
        return members is None or member in members  # None: not known, assume it is there

    @classmethod
    def from_snapshot(cls, snap: Mapping[str, Any], source: str | None = None) -> "NpuApi":
        """Pure: the API a snapshot (tools/extract_torch_npu_signatures.py) describes."""
        keywords = {name: _keywords_of_params([(p["name"], p["kind"]) for p in entry["params"]])
                    for name, entry in snap["functions"].items()}
        absent = set(snap.get("absent", ()))
        absent |= {name for name in _OBJECTS if name not in keywords}
        enums = {name: frozenset(members) for name, members in snap["enums"].items()}
        attrs = snap.get("instance_attributes", {}).get("torch_npu.profiler.profile")
        return cls(version=snap.get("version"), keywords=keywords, absent=frozenset(absent), enums=enums,
                   attributes=frozenset(attrs) if attrs is not None else None,
                   source=source or f"snapshot {snap.get('version')}")


def installed_api(tnpu: Any) -> NpuApi:
    """What the imported torch_npu offers: each function's own signature where it can be read,
    else (a wrapper hiding it) the snapshot of the nearest release; enum members from the classes;
    the instance attributes of `profile` (set inside __init__, not readable without running it)
    from the snapshot."""
    raw = getattr(tnpu, "__version__", None)
    version = raw if isinstance(raw, str) else None
    snap_version = nearest_snapshot(version)
    snap = NpuApi.from_snapshot(load_snapshot(snap_version)) if snap_version else None
    keywords: dict[str, frozenset[str] | None] = {}
    absent: set[str] = set()
    used_snapshot = False
    for name, path in _OBJECTS.items():
        obj: Any = tnpu
        for part in path:
            obj = getattr(obj, part, None)
            if obj is None:
                break
        if obj is None:
            absent.add(name)
            continue
        accepted = _inspected_keywords(obj)
        if accepted is _OPAQUE:
            if snap is not None and snap.has(name):
                accepted = snap.keywords.get(name)
                used_snapshot = True
            else:
                accepted = None  # nothing tells: pass what the newest API takes
        keywords[name] = accepted
    enums: dict[str, frozenset[str]] = {}
    profiler = getattr(tnpu, "profiler", None)
    for enum in ENUMS:
        cls = getattr(profiler, enum, None)
        if cls is None:
            absent.add(enum)
        else:
            enums[enum] = frozenset(n for n in dir(cls) if not n.startswith("_"))
    source = "inspected"
    if snap is not None:
        near = "" if snap_version == version else f", nearest to {version}"
        what = "hidden signatures and profile attributes" if used_snapshot else "profile attributes"
        source += f"; {what} from snapshot {snap_version}{near}"
    return NpuApi(version=version, keywords=keywords, absent=frozenset(absent), enums=enums,
                  attributes=snap.attributes if snap is not None else None, source=source)
