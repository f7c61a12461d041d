"""Why an automatic capture (`integrated.auto_capture`) was taken, as written on disk: the id of
its on-demand request and one note in each capture's metadata, read back by the analysis's
finding (`slow_iteration_captured`). Both sides read the form from here; standard library only.

The note is the prefix and the reason as JSON, so a person reads it and the analysis parses it:

    auto_capture: {"slow_iteration": 12, "time_s": 0.52, "median_s": 0.12, "ratio": 4.3, "factor": 3.0,
                   "stage": null, "role": "actor", "rank": 0, "iterations": [13, 14], ...}
"""
from __future__ import annotations

import json
from typing import Any, Iterable, Mapping

NOTE_PREFIX = "auto_capture: "
REQUEST_PREFIX = "auto-"
# the reason's keys (docs/ondemand.md, "Automatic capture of the slow iteration")
REASON_KEYS = ("slow_iteration", "time_s", "median_s", "ratio", "factor", "stage", "history", "role", "rank",
               "iterations")


def request_id(role: str, slow_iteration: int) -> str:
    """The request of the capture after `slow_iteration` of `role`: the same on every rank that saw
    it, so a rank that decided for itself ignores the copy another rank posted."""
    return f"{REQUEST_PREFIX}{role}-i{slow_iteration}"


def reason_note(reason: Mapping[str, Any]) -> str:
    """The metadata note that carries `reason`."""
    return NOTE_PREFIX + json.dumps(dict(reason), sort_keys=True, allow_nan=False)


def reason_of(notes: Iterable[Any] | None) -> dict[str, Any] | None:
    """The reason in a capture's metadata notes, or None (no auto capture, or a note that does not
    parse: a corrupt record is not a reason)."""
    for note in notes or ():
        if isinstance(note, str) and note.startswith(NOTE_PREFIX):
            try:
                got = json.loads(note[len(NOTE_PREFIX):])
            except ValueError:
                return None
            return got if isinstance(got, dict) else None
    return None
