"""The marker kind `record_function`: torch.profiler.record_function, a user_annotation inside a
running torch capture (and the range that draws an RL stage there)."""
from __future__ import annotations

from typing import Any

from mindspeed_profiler.backends.marker_kinds import MarkerKind, register_marker_kind


class RecordFunctionMarkers:
    """torch.profiler.record_function: shows up as user_annotation in a running torch capture."""

    def __init__(self, record_function: Any):
        self.record_function = record_function

    def start(self, name: str, domain: str, stream: Any) -> Any:
        rf = self.record_function(name)
        rf.__enter__()
        return rf

    def end(self, token: Any, domain: str) -> None:
        token.__exit__(None, None, None)

    def mark(self, message: str, domain: str, stream: Any) -> None:
        with self.record_function(message):
            pass


def load() -> RecordFunctionMarkers:
    from torch.profiler import record_function

    return RecordFunctionMarkers(record_function)


register_marker_kind(MarkerKind("record_function", load))
