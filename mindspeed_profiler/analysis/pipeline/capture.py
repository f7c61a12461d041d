"""Analyse one discovered capture (runs in a worker process): files in, a JSON-able dict out.

Every failure is caught here and turned into `status: "failed"` with the path and the reason,
so one bad file never stops the batch. What each kind means is its input module's business
(inputs/).
"""
from __future__ import annotations

import time
import traceback
from pathlib import Path

from mindspeed_profiler.core.gcpause import collector_paused
from mindspeed_profiler.analysis.pipeline.discover import Capture
from mindspeed_profiler.analysis.inputs import input_kind
from mindspeed_profiler.analysis.inputs.record import state_warnings


def analyse_capture(root: str, cap_dict: dict, top_n: int = 20, want_events: bool = False) -> dict:
    """Worker entry point: returns {"capture": dict, "events": dict | None}."""
    cap = Capture(**cap_dict)
    res = cap.to_dict()
    res.update(status="ok", error=None)
    t = time.perf_counter()
    events = None
    # millions of fresh dicts from the JSON parser would trigger the cyclic GC again and again
    # (each pass walks every live object); nothing here makes cycles, so pause it
    with collector_paused():
        try:
            fields, events = input_kind(cap.kind).analyse(Path(root), cap, top_n, want_events)
            found = fields.pop("warnings", [])
            res.update(fields)
            res["warnings"] = list(cap.warnings) + list(found) + state_warnings(cap.meta)
        except MemoryError:
            res.update(status="failed", error="the analysis needed more memory than the per-capture limit "
                                              "(--capture-memory-mb): the file may be a decompression bomb")
            events = None
        except Exception as exc:  # noqa: BLE001 - reported per capture, the batch goes on
            from mindspeed_profiler.analysis.parsing import jsonscan   # (imported by then: only its name here)

            res.update(status="failed", error=f"{type(exc).__name__}: {exc}")
            if not isinstance(exc, (ValueError, OSError, jsonscan.TraceFormatError, KeyError)):
                res["traceback"] = traceback.format_exc(limit=5)
            events = None
    res["analyse_s"] = round(time.perf_counter() - t, 4)
    return {"capture": res, "events": events}
