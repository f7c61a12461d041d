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


def state_warnings(meta: dict | None) -> list[str]:
    """Pure: what a capture's metadata says about how it ended, as warnings: stopped early by its
    host memory budget, or its background export never finished (the files listed are whole)."""
    meta = meta if isinstance(meta, dict) else {}
    out = []
    early = meta.get("stopped_early")
    if isinstance(early, dict):
        out.append(f"capture stopped early at iteration {early.get('iteration')} ({early.get('reason')}: the process "
                   f"grew {early.get('grown_mb')} MB while recording, budget {early.get('budget_mb')} MB); "
                   f"planned iterations {meta.get('planned_steps')}")
    if meta.get("status") == "exporting":
        late = [n for n in meta.get("notes") or [] if isinstance(n, str) and n.startswith("export not finished")]
        out.append("capture export not finished: " + (late[-1] if late else "the process ended during its background "
                                                      "export; the trace files listed are whole"))
    return out
