"""A system directory (process-level capture, docs/formats.md) -> one record per wrapped worker: its
metadata (`<group>_rank<R>.system.json`), its iteration records (`.iterations.jsonl`) and where its
report is. Reads the files as the contract describes them; never imports the runtime."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from mindspeed_profiler.core import formats
from mindspeed_profiler.core.fileio import read_regular_file

from .numbers import int_or

MAX_META_BYTES = 16 << 20          # a worker's metadata is a few KB
MAX_ITERATIONS_BYTES = 512 << 20   # one line per iteration and clock mark


@dataclass
class SystemWorker:
    meta_path: Path
    meta: dict
    report_name: str | None = None                      # checked: a plain name inside the directory
    header: dict | None = None                          # the iterations file's "worker" record
    iterations: list[dict] = field(default_factory=list)
    ranges: list[dict] = field(default_factory=list)
    clock_marks: list[dict] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def base(self) -> str:
        return self.meta_path.name[: -len(formats.SYSTEM_META_SUFFIX)]

    @property
    def backend(self) -> str:
        return str(self.meta.get("backend"))

    @property
    def report(self) -> Path:
        return self.meta_path.parent / (self.report_name or self.base + formats.SYSTEM_REPORTS.get(self.backend, ""))

    @property
    def pid(self) -> int | None:
        """The wrapped Python worker's pid (from its iteration records; the metadata has the launcher's)."""
        return self.header.get("pid") if self.header else None

    @property
    def host(self) -> str | None:
        return (self.header or {}).get("host") or self.meta.get("host")

    def step_windows_ns(self) -> list[tuple[int, int]] | None:
        """The listed steps' [begin, end) wall-clock ns, or None when the capture was not limited to steps."""
        if not self.meta.get("steps"):
            return None
        return [(int(r["begin_wall_ns"]), int(r["end_wall_ns"])) for r in self.iterations if r.get("listed")]


def report_name(meta_path: Path, name) -> tuple[str | None, str | None]:
    """The metadata's `report` when it names a file or directory inside the system directory (a
    plain name whose resolved path stays there), else (None, why): metadata is data, and a name
    such as `../../etc/passwd`, an absolute path or a link to /dev/zero must never make the analysis
    read anything outside the run."""
    if name is None or name == "":
        return None, None
    if not isinstance(name, str) or "/" in name or "\\" in name or "\0" in name or name in (".", "..") or len(name) > 255:
        return None, f"report {str(name)[:100]!r} in {meta_path.name} is not a file name in this directory: ignored"
    d = os.path.realpath(meta_path.parent)
    target = os.path.realpath(meta_path.parent / name)
    if os.path.commonpath([d, target]) != d:
        return None, f"report {name!r} in {meta_path.name} leads outside the directory ({target}): ignored"
    return name, None


def is_system_dir(names: list[str]) -> bool:
    return any(n.endswith(formats.SYSTEM_META_SUFFIX) for n in names)


def read_system_dir(d: Path) -> list[SystemWorker]:
    """Every worker of a system directory, sorted by group and rank; unreadable files are reported
    in the worker's `problems` (a metadata file that cannot be read gives a worker with meta {})."""
    out = []
    for meta_path in sorted(Path(d).glob("*" + formats.SYSTEM_META_SUFFIX)):
        w = SystemWorker(meta_path, {})
        try:
            meta = orjson.loads(read_regular_file(meta_path, MAX_META_BYTES))
            if not isinstance(meta, dict):
                raise ValueError("not a JSON object")
            w.meta = meta
            w.report_name, why = report_name(meta_path, meta.get("report"))
            if why:
                w.problems.append(why)
        except (OSError, ValueError) as exc:
            w.problems.append(f"{meta_path.name}: unreadable ({exc})")
        _read_iterations(w, meta_path.parent / (w.base + formats.SYSTEM_ITERATIONS_SUFFIX))
        out.append(w)
    return sorted(out, key=lambda w: (str(w.meta.get("group")), int_or(w.meta.get("rank"))))


def _read_iterations(w: SystemWorker, path: Path) -> None:
    try:
        lines = read_regular_file(path, MAX_ITERATIONS_BYTES).splitlines()
    except FileNotFoundError:
        return
    except (OSError, ValueError) as exc:
        w.problems.append(f"{path.name}: unreadable ({exc})")
        return
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rec = orjson.loads(line)
        except ValueError:
            w.problems.append(f"{path.name}:{n}: not JSON (a truncated last line after a crash?)")
            continue
        kind = rec.get("type") if isinstance(rec, dict) else None
        if kind == formats.SYS_WORKER:
            w.header = rec
        elif kind == formats.SYS_ITERATION:
            w.iterations.append(rec)
        elif kind == formats.SYS_RANGE:
            w.ranges.append(rec)
        elif kind == formats.SYS_CLOCK:
            w.clock_marks.append(rec)
