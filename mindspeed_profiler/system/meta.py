"""A wrapped worker's metadata file (`<group>_rank<R>.system.json`, keys formats.SYSTEM_META_KEYS):
written by the launcher before the tool starts, finished by the watcher after the tool exits, read by
the driver's wait and by the analysis (which reads the JSON itself: it never imports the runtime)."""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from mindspeed_profiler.core import formats
from mindspeed_profiler.core.fileio import read_json_object, write_json_atomic
from mindspeed_profiler.system.spec import WorkerSpec


def new_meta(spec: WorkerSpec, *, tool: str, tool_path: str | None, command: list[str], status: str,
             reason: str | None, host: str, launcher_pid: int, launched_wall_ns: int) -> dict[str, Any]:
    meta = {
        "schema": formats.SYSTEM_SCHEMA, "run_id": spec.run_id, "backend": spec.backend, "tool": tool,
        "tool_path": tool_path, "version": None, "group": spec.group, "rank": spec.rank, "host": host,
        "launcher_pid": launcher_pid, "command": command, "steps": list(spec.steps) if spec.steps else None,
        "report": spec.report_path.name, "status": status, "reason": reason, "launched_wall_ns": launched_wall_ns,
        "ended_wall_ns": None, "report_bytes": None, "env": dict(spec.env),
    }
    assert tuple(meta) == formats.SYSTEM_META_KEYS
    return meta


def write_meta(path: Path, meta: dict[str, Any]) -> None:
    write_json_atomic(path, meta)


def read_meta(path: Path) -> dict[str, Any] | None:
    return read_json_object(path)


def update_meta(path: Path, **changes: Any) -> dict[str, Any] | None:
    """Read, change, write back (one writer at a time: the launcher, then the watcher)."""
    meta = read_meta(path)
    if meta is None:
        return None
    meta.update(changes)
    write_meta(path, meta)
    return meta


def size_of(path: Path) -> int:
    if path.is_dir():
        return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    return path.stat().st_size if path.is_file() else 0


def remove_previous(spec: WorkerSpec) -> None:
    """A re-run of the same group and rank replaces its files: remove the old report, metadata and
    iteration records first (names are stable, so they would be mixed with the new ones)."""
    for path in (spec.meta_path, spec.iterations_path, spec.report_path):
        try:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            elif path.exists() or path.is_symlink():
                path.unlink()
        except OSError:
            pass
