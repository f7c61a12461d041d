"""Who recorded an Ascend capture: the rank and the parallel layout torch_npu writes beside the
parsed output.

- `profiler_info_<N>.json`: `rank_id` (an int or its text; -1 when torch.distributed was not up),
  the profiler level and export type, torch_npu / CANN versions (newer releases);
- `profiler_metadata.json`: `distributed_args` (rank, world size, tp / pp / dp / cp / ep sizes, as
  MindSpeed and Megatron report them) and `parallel_group_info` (each process group: its name,
  this rank's place in it, the global ranks);
- the device id is not the rank (a 4-rank job may run on devices 0, 1, 4, 5): it comes from
  step_trace_time.csv's `Device_id` or the db's RANK_DEVICE_MAP, read with those files.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from mindspeed_profiler.core import formats

from .numbers import bounded_int, shown

# any suffix: one that is not a rank ("²", "①") is a warning, the file's rank_id still read
PROFILER_INFO_RE = re.compile(r"^profiler_info(?:_([^.]+))?\.json$")
# parallel_group_info group names -> our layout dimensions (runtime/megatron.py's keys)
GROUP_DIMS = {"tp": "tp", "pp": "pp", "dp": "dp", "cp": "cp", "ep": "ep", "exp": "ep", "dp_cp": "dp_cp"}
_ARG_DIMS = {"tensor_model_parallel_size": "tp", "pipeline_model_parallel_size": "pp", "data_parallel_size": "dp",
             "context_parallel_size": "cp", "expert_model_parallel_size": "ep"}
MAX_META_BYTES = 16 << 20   # these files are a few KB; a bigger one is not torch_npu's


@dataclass
class AscendIdentity:
    rank: int | None = None
    world_size: int | None = None
    parallel: dict | None = None        # {"tp": [rank in group, size], "pp": ..., ...} (runtime/megatron.py's shape)
    groups: list[dict] = field(default_factory=list)   # [{"name", "rank", "ranks"}] from parallel_group_info
    level: str | None = None
    export_type: str | None = None
    versions: dict = field(default_factory=dict)        # torch_npu / cann, when written
    sources: list[str] = field(default_factory=list)    # the files read
    warnings: list[str] = field(default_factory=list)


def _load(path: Path) -> dict | None:
    if path.stat().st_size > MAX_META_BYTES:
        raise ValueError(f"{path.name}: {path.stat().st_size} bytes, more than any torch_npu metadata file")
    obj = orjson.loads(path.read_bytes())
    return obj if isinstance(obj, dict) else None


def _rank(v, where: str, ident: AscendIdentity) -> int | None:
    """A rank field (`where` names file and field; -1: torch.distributed was not up); None when
    absent, and a warning too when it is no integer in ASCII digits."""
    n = bounded_int(v, formats.MAX_RANK)
    if v is not None and n is None:
        ident.warnings.append(f"{where}: {shown(v)} is not a rank (allowed: an integer 0 to {formats.MAX_RANK}, "
                              "in ASCII digits): ignored")
    return n


def read_identity(capture_dir: Path) -> AscendIdentity:
    """The identity files in a capture directory (`*_ascend_pt/`, or the directory above a loose
    ASCEND_PROFILER_OUTPUT); damaged files are warnings, never failures."""
    ident = AscendIdentity()
    try:
        names = sorted(p.name for p in capture_dir.iterdir() if p.is_file())
    except OSError:
        return ident
    for name in names:
        m = PROFILER_INFO_RE.match(name)
        if m:
            _profiler_info(capture_dir / name, m.group(1), ident)
    if formats.ASCEND_METADATA_FILE in names:
        _metadata(capture_dir / formats.ASCEND_METADATA_FILE, ident)
    return ident


def _read(path: Path, ident: AscendIdentity) -> dict | None:
    """The file's JSON object (None: not one, or damaged: a warning); noted as read."""
    try:
        obj = _load(path)
    except (OSError, ValueError) as exc:
        ident.warnings.append(f"{path.name}: unreadable ({type(exc).__name__}: {exc})")
        return None
    if obj is not None:
        ident.sources.append(path.name)
    return obj


def _profiler_info(path: Path, suffix: str | None, ident: AscendIdentity) -> None:
    info = _read(path, ident)
    if info is None:
        return
    rank = _rank(info.get("rank_id"), f"{path.name} rank_id", ident)
    if suffix is not None:   # the N of profiler_info_N.json: where rank_id is absent or bad
        named = _rank(suffix, f"{path.name}: the rank in the file name", ident)
        rank = named if rank is None else rank
    if rank is not None and rank >= 0:
        ident.rank = rank
    exp = ((info.get("config") or {}).get("experimental_config") or {}) if isinstance(info.get("config"), dict) else {}
    if isinstance(exp, dict):
        level = exp.get("_profiler_level")
        ident.level = level if isinstance(level, str) else ident.level
        et = exp.get("_export_type")
        if isinstance(et, list):
            et = ",".join(str(x) for x in et)
        ident.export_type = et if isinstance(et, str) else ident.export_type
    for k in ("torch_npu_version", "cann_version"):
        if isinstance(info.get(k), str):
            ident.versions[k.replace("_version", "")] = info[k]


def _metadata(path: Path, ident: AscendIdentity) -> None:
    meta = _read(path, ident)
    if meta is None:
        return
    args = meta.get("distributed_args") if isinstance(meta.get("distributed_args"), dict) else {}
    rank = _rank(args.get("rank"), f"{path.name} distributed_args.rank", ident)
    world = bounded_int(args.get("world_size"), formats.MAX_RANK)
    if ident.rank is None and rank is not None and rank >= 0:
        ident.rank = rank
    elif rank is not None and ident.rank is not None and rank != ident.rank:
        ident.warnings.append(f"{path.name} says rank {rank}, profiler_info says {ident.rank}: profiler_info kept")
    ident.world_size = world if world and world > 0 else None
    layout: dict[str, list] = {}
    groups_seen: dict[str, list[int]] = {}
    for key, dim in _ARG_DIMS.items():   # sizes only: this rank's place in the group comes from the groups
        size = bounded_int(args.get(key), formats.MAX_RANK)
        if size and size > 0:
            layout[dim] = [None, size]
    groups = meta.get("parallel_group_info") if isinstance(meta.get("parallel_group_info"), dict) else {}
    for gid, g in groups.items():
        if not isinstance(g, dict) or not isinstance(g.get("group_name"), str):
            continue
        ranks = g.get("global_ranks")
        ranks = [r for r in ranks if isinstance(r, int) and not isinstance(r, bool)] if isinstance(ranks, list) else []
        grank = bounded_int(g.get("group_rank"), formats.MAX_RANK)
        ident.groups.append({"id": str(gid), "name": g["group_name"], "rank": grank, "ranks": ranks})
        dim = GROUP_DIMS.get(g["group_name"])
        if dim and grank is not None and ranks:
            groups_seen[dim] = [grank, len(ranks)]
        if g["group_name"] == "default_group" and ranks and ident.world_size is None:
            ident.world_size = len(ranks)
    if "dp_cp" in groups_seen and "dp" not in groups_seen:   # MindSpeed names the data-parallel group dp_cp
        groups_seen["dp"] = groups_seen["dp_cp"]
    groups_seen.pop("dp_cp", None)
    layout.update(groups_seen)
    ident.parallel = layout or None
