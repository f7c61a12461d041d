"""Finishing cleanly: a system profiler writes its report only once the wrapped process has exited
normally, and the watcher then marks the worker's metadata "complete" (or "incomplete"). The driver
shuts wrapped workers down gracefully and waits, bounded, for those marks (integrations/ray.py runs
`wait_for_reports` on each worker's node, so no shared filesystem is needed)."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Sequence

from mindspeed_profiler.system.meta import read_meta

RUNNING = "running"


def wait_for_reports(meta_paths: Sequence[str], timeout_s: float = 120.0, poll_s: float = 0.2) -> list[dict]:
    """Each worker's metadata once its tool has exited (status no longer "running"), or as it is
    at the deadline with status "timeout" (and what it was in `last_status`); "missing" when the file
    is not there at all (the launcher never ran on that node)."""
    deadline = time.monotonic() + max(0.0, timeout_s)
    pending = {str(p) for p in meta_paths}
    found: dict[str, dict] = {}
    while True:
        for p in sorted(pending):
            meta = read_meta(Path(p))
            if meta is not None and meta.get("status") != RUNNING:
                found[p] = meta
                pending.discard(p)
        if not pending or time.monotonic() >= deadline:
            break
        time.sleep(poll_s)
    for p in pending:
        meta = read_meta(Path(p))
        found[p] = dict(meta, last_status=meta.get("status"), status="timeout") if meta is not None else \
            {"status": "missing", "reason": f"no metadata at {p}"}
    return [dict(found[str(p)], meta_path=str(p)) for p in meta_paths]
