"""A system directory (process-level capture, docs/formats.md) -> one record per wrapped worker: its
metadata (`<group>_rank<R>.system.json`), its iteration records (`.iterations.jsonl`) and where its
report is. Reads the files as the contract describes them; never imports the runtime."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import orjson

from mindspeed_profiler import formats


@dataclass
class SystemWorker:
    meta_path: Path
    meta: dict
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
        name = self.meta.get("report")
        return self.meta_path.parent / (name if isinstance(name, str) and name else
                                         self.base + formats.SYSTEM_REPORTS.get(self.backend, ""))

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


def is_system_dir(names: list[str]) -> bool:
    return any(n.endswith(formats.SYSTEM_META_SUFFIX) for n in names)


def read_system_dir(d: Path) -> list[SystemWorker]:
    """Every worker of a system directory, sorted by group and rank; unreadable files are reported
    in the worker's `problems` (a metadata file that cannot be read gives a worker with meta {})."""
    out = []
    for meta_path in sorted(Path(d).glob("*" + formats.SYSTEM_META_SUFFIX)):
        w = SystemWorker(meta_path, {})
        try:
            meta = orjson.loads(meta_path.read_bytes())
            if not isinstance(meta, dict):
                raise ValueError("not a JSON object")
            w.meta = meta
        except (OSError, ValueError) as exc:
            w.problems.append(f"{meta_path.name}: unreadable ({exc})")
        _read_iterations(w, meta_path.parent / (w.base + formats.SYSTEM_ITERATIONS_SUFFIX))
        out.append(w)
    return sorted(out, key=lambda w: (str(w.meta.get("group")), _int(w.meta.get("rank"))))


def _int(v: object) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) else -1


def _read_iterations(w: SystemWorker, path: Path) -> None:
    try:
        lines = path.read_bytes().splitlines()
    except OSError:
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
