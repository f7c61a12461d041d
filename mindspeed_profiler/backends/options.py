"""The backend-specific options of `profiler_config.integrated`: fields only some tools honour.

Data only (the registry checks a backend's `honours` against it; honour.py writes the notes).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class BackendOption:
    """An integrated field only some backends honour."""

    field: str
    feature: str  # what it asks for, in words; "{value}" is replaced by the configured value
    instead: str = ""  # what happens on a backend that does not honour it, when worth saying


# The backend-specific fields. A new one: a line here, and its name in the `honours` of the
# backends that read it.
BACKEND_OPTIONS: tuple[BackendOption, ...] = (
    BackendOption("l2_cache", "L2 cache sampling"),
    BackendOption("aic_metrics", "AI Core metrics"),
    BackendOption("profile_export_type", "{value} export", "the capture is written in its own format"),
    BackendOption("data_simplification", "data simplification"),  # false: torch_npu keeps its intermediate files
    BackendOption("profile_analysis", "online analysis", "`mindspeed-profiler analyse` reads the capture offline"),
    BackendOption("export_after_run", "session held across captures", "each capture is written when it ends"),
)
OPTION_FIELDS = frozenset(o.field for o in BACKEND_OPTIONS)


def yaml_value(value: Any) -> str:
    """A config value as it is written in the YAML (true, null, [a, b], db)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(map(yaml_value, value)) + "]"
    return str(value)
