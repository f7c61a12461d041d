"""The run's record of process-level capture: a `system` entry in run.json (formats.RUN_FILE) with
each wrapped worker's group, rank, node, tool, status and reason, and the failures named once."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from mindspeed_profiler.core import formats
from mindspeed_profiler.core.fileio import update_json

RUN_KEY = "system"
PROBLEM_STATUSES = ("unwrapped", "incomplete", "timeout", "missing")


def failures(workers: Sequence[dict[str, Any]]) -> list[str]:
    """One line per worker whose report will not be there, naming tool, group, rank and node."""
    return [f"{w.get('tool') or w.get('backend')} for group {w.get('group')} rank {w.get('rank')} on "
            f"{w.get('host') or '?'}: {w.get('status')}: {w.get('reason') or ''}".rstrip(": ")
            for w in workers if w.get("status") in PROBLEM_STATUSES]


def record_in_run(save_path: str | Path, system_cfg: Any, workers: Sequence[dict[str, Any]]) -> Path | None:
    """Merge the `system` entry into `<save_path>/run.json` (created if missing). Never raises."""
    path = Path(save_path) / formats.RUN_FILE
    keep = ("group", "rank", "backend", "tool", "version", "status", "reason", "host", "node_id", "pid", "report",
            "report_bytes", "steps")
    entry = {
        "backend": system_cfg.backend, "worker_groups": system_cfg.worker_groups,
        "steps": list(system_cfg.steps) if system_cfg.steps else None,
        "workers": [{k: w.get(k) for k in keep if k in w} for w in workers],
        "failures": failures(workers),
    }

    def change(run):
        if run is None and path.exists():
            return None   # there but unreadable: left alone
        return {**(run or {"schema": formats.RUN_SCHEMA}), RUN_KEY: entry}
    try:
        return update_json(path, change)   # under run.json's lock: triggers may be appending requests
    except Exception:
        return None
