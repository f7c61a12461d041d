"""`Capture`: the record of one discovered capture (where, what kind, which files, who recorded it).
Below both the input registry, whose kinds fill it, and discovery, which makes it."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass
class Capture:
    path: str                  # relative to the root ("." for the root itself)
    kind: str                  # an input kind's name (inputs/), or "unreadable"
    files: list[str] = field(default_factory=list)   # relative to the root
    role: str | None = None
    rank: int | None = None
    stage: str | None = None
    step_range: list[int] | None = None   # [first, last] iteration, from the metadata / name
    run_id: str | None = None             # the run that wrote it (metadata); for a timeline, the run to analyse
    meta: dict | None = None
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)
