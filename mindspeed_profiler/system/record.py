"""The run's record of process-level capture: a `system` entry in run.json (formats.RUN_FILE) with
each wrapped worker's group, rank, node, tool, status and reason, and the failures named once."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

from mindspeed_profiler import formats
from mindspeed_profiler.backends.layout import write_json_atomic

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
    try:
        run = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {"schema": formats.RUN_SCHEMA}
        if not isinstance(run, dict):
            return None
        keep = ("group", "rank", "backend", "tool", "version", "status", "reason", "host", "node_id", "pid", "report",
                "report_bytes", "steps")
        run[RUN_KEY] = {
            "backend": system_cfg.backend, "worker_groups": system_cfg.worker_groups,
            "steps": list(system_cfg.steps) if system_cfg.steps else None,
            "workers": [{k: w.get(k) for k in keep if k in w} for w in workers],
            "failures": failures(workers),
        }
        return write_json_atomic(path, run)
    except Exception:
        return None
