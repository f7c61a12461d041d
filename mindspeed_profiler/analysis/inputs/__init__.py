"""The registry of analysis inputs: kind -> how to find it on disk and how to analyse it.

A kind can claim a whole directory (a capture directory: the walk does not descend into it), or
files inside an ordinary directory, or a file given directly to `analyse`; `analyse` turns one
discovered capture into summary fields; `prepare` (optional) runs once per batch before the
analysis (e.g. parsing raw Ascend captures) and says which captures stay unanalysable.

Adding an input kind is one module that calls `register_input(InputKind(...))` plus one line in
BUILTIN_MODULES. Kinds are tried in `order` (lower first).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Optional

from mindspeed_profiler.core.registry import Registry

if TYPE_CHECKING:
    from mindspeed_profiler.analysis.inputs.record import Capture

BUILTIN_MODULES = (
    "mindspeed_profiler.analysis.inputs.ascend",
    "mindspeed_profiler.analysis.inputs.kineto",
    "mindspeed_profiler.analysis.inputs.timeline",
    "mindspeed_profiler.analysis.inputs.tracker",
    "mindspeed_profiler.analysis.inputs.samples",
    "mindspeed_profiler.analysis.inputs.memory_records",
    "mindspeed_profiler.analysis.inputs.rlinf",
    "mindspeed_profiler.analysis.inputs.cluster",
    "mindspeed_profiler.analysis.inputs.system",
    "mindspeed_profiler.analysis.inputs.unreadable",
)

# (root, directory) -> the capture that is this whole directory, or None
ClaimDir = Callable[[Path, Path], Optional["Capture"]]
# (root, directory, file names, names already claimed) -> captures; adds what it takes to the claimed set
ClaimFiles = Callable[[Path, Path, list, set], list]
# (root, capture, top_n, want_events) -> (summary fields, event columns or None); raises on failure
Analyse = Callable[[Path, "Capture", int, bool], tuple]
# (root, captures, jobs, export_type, log, python) -> {capture path: why it stays unanalysed}
Prepare = Callable[..., dict]


@dataclass(frozen=True)
class InputKind:
    name: str
    analyse: Analyse
    order: int = 100
    claim_dir: Optional[ClaimDir] = None
    claim_files: Optional[ClaimFiles] = None
    claims_file_root: Optional[Callable[[str], bool]] = None   # a file named so, given as the root, is this kind
    prepare: Optional[Prepare] = None


REGISTRY: Registry[InputKind] = Registry(BUILTIN_MODULES)


def register_input(kind: InputKind) -> InputKind:
    return REGISTRY.add(kind.name, kind)


def input_kinds() -> tuple[InputKind, ...]:
    return tuple(sorted(REGISTRY, key=lambda k: (k.order, k.name)))


def input_kind(name: str) -> InputKind:
    kind = REGISTRY.get(name)
    if kind is None:
        raise ValueError(f"cannot analyse a capture of kind {name!r} (known: {', '.join(sorted(REGISTRY.entries))})")
    return kind


DEFAULT_FILE_KIND = "kineto"  # a file given directly that no kind recognises is read as a Kineto trace
