"""The registry of marker kinds: name -> MarkerKind, the implementations the mstx helpers
(mindspeed_profiler/runtime/mstx.py) dispatch to. Capture backends name the kinds they want
(`Backend.device_markers` / `capture_markers` / `stage_marker`).

A new kind is one module defining its implementation (start / end / mark, the `Markers` protocol)
and one line `register_marker_kind(MarkerKind("name", loader))`, plus its module in BUILTIN_MODULES
(or imported before the markers are first used). Loading a kind's module never imports torch /
torch_npu: `load()` does, the first time the kind is used.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Protocol

from mindspeed_profiler.core.registry import Registry

DEFAULT_DOMAIN = "default"  # the domain of a marker that names none (mstx.DEFAULT_DOMAIN)

BUILTIN_MODULES = (
    "mindspeed_profiler.backends.marker_kinds.npu_mstx",
    "mindspeed_profiler.backends.marker_kinds.nvtx",
    "mindspeed_profiler.backends.marker_kinds.record_function",
    "mindspeed_profiler.backends.markers",   # `buffer`: the lightweight capture's own recorder
)


class Markers(Protocol):
    """One marker kind's implementation. None from start() means nothing to end."""

    def start(self, name: str, domain: str, stream: Any) -> Any: ...

    def end(self, token: Any, domain: str) -> None: ...

    def mark(self, message: str, domain: str, stream: Any) -> None: ...


@dataclass(frozen=True)
class MarkerKind:
    """A marker kind: `load()` returns its implementation, or raises where it cannot run here
    (the kind is then skipped, said once)."""

    name: str
    load: Callable[[], Markers]


MARKERS: Registry[MarkerKind] = Registry(BUILTIN_MODULES)


def register_marker_kind(kind: MarkerKind) -> MarkerKind:
    """Make `kind.name` a marker kind backends may name."""
    if not isinstance(kind, MarkerKind) or not kind.name:
        raise TypeError(f"register_marker_kind: expected a MarkerKind with a name, got {kind!r}")
    return MARKERS.add(kind.name, kind)


def marker_kind(name: str) -> MarkerKind | None:
    return MARKERS.get(name)


def marker_kind_names() -> tuple[str, ...]:
    return tuple(k.name for k in MARKERS)
