"""The profiler's own memory (issue 47): every buffer it keeps in a training process, each with a
stated bound, summed into the capture metadata's `own_memory` (docs/memory.md "The profiler's own
memory"). slime #1879 saw 60 GB of profiler buffers per rank: here each buffer says how large it can
grow, and a test holds the resident growth of a long run (tests/test_own_memory.py).

The bound of a buffer is its count bound times a per-item size (bytes): the tracer's events
(`tracer.buffer_max_events`), the pending sample records (formats.MAX_SAMPLES_PER_ITERATION per
profiler recording them), the stage calls the memory meter keeps until step()
(stage_memory.MAX_CALLS_PER_ITERATION per tracker), the allocator's history (`oom_snapshot_entries`,
and memory_snapshot.MAX_ENTRIES while a `profile_with_memory` window records; kept by the allocator,
on the host), and what torch.profiler holds while a capture records (`capture_memory_budget_mb`: the
capture stops past it; null: unbounded). The per-item sizes are measured by the test on this
build (a buffered stage span ~350 B, a pending sample ~320 B, a stage call ~320 B) and stated with
margin; the history's is an estimate (no device here to measure it).
"""
from __future__ import annotations

import sys
from typing import Any

from mindspeed_profiler.core import formats
from mindspeed_profiler.core.state import STATE
from mindspeed_profiler.runtime.host_memory import rss_bytes

TRACER_EVENT_BYTES = 512      # a buffered span with its args (measured: 160 B without args, ~350 B a stage's)
SAMPLE_BYTES = 1024           # a pending per-sample record (measured ~320 B for a plain dict of 6 fields)
STAGE_CALL_BYTES = 512        # a stage call the memory meter keeps until step() (measured ~320 B)
HISTORY_ENTRY_BYTES = 2048    # an allocator history event with its Python stack (an estimate: ~20 frames)
MIB = 2**20


def own_memory(integ: Any = None) -> dict[str, Any]:
    """{"bounds_bytes": {buffer: bound or None (unbounded)}, "total_bytes": the sum of the bounded
    ones, "unbounded": [buffers], "resident_bytes": the process now} for this process's buffers."""
    bounds: dict[str, int | None] = {}
    rec = STATE.tracer
    if rec is not None:
        bounds["tracer_events"] = int(getattr(rec, "buffer_max", 0)) * TRACER_EVENT_BYTES
    samples = sys.modules.get("mindspeed_profiler.rollout.recorder")
    n = len(getattr(samples, "_RECORDERS", ())) if samples is not None else 0
    if n:
        bounds["sample_records"] = n * formats.MAX_SAMPLES_PER_ITERATION * SAMPLE_BYTES
    tracking = sys.modules.get("mindspeed_profiler.metrics.memory_tracking")
    if tracking is not None and len(tracking.LIVE):
        from mindspeed_profiler.metrics.stage_memory import MAX_CALLS_PER_ITERATION

        bounds["stage_memory"] = len(tracking.LIVE) * MAX_CALLS_PER_ITERATION * STAGE_CALL_BYTES
    history = sys.modules.get("mindspeed_profiler.backends.memory_snapshot")
    if history is not None:
        entries = sum(e for e, _ in history.HISTORY.standing.values())
        entries += history.MAX_ENTRIES * sum(1 for n in history.HISTORY.captures.values() if n)
        if entries:
            bounds["memory_history"] = entries * HISTORY_ENTRY_BYTES
    if integ is not None and getattr(integ, "profile", False):
        budget = integ.capture_memory_budget_mb
        bounds["capture"] = int(budget * MIB) if budget is not None else None
    return {"bounds_bytes": bounds, "total_bytes": sum(v for v in bounds.values() if v is not None),
            "unbounded": sorted(k for k, v in bounds.items() if v is None), "resident_bytes": rss_bytes()}
