"""What a capture is asked to record, backend-neutral, and the one map between the profilers'
keywords and our `integrated` config fields (profile_memory <-> profile_with_memory, ...).

The backends (torch.profiler, torch_npu.profiler), the on-demand requests (torch_npu's
profiler_config.json) and the config's dialects (verl's `contents`) each read it from here:
standard library only, below both the backends and the config, so neither imports the other
for it. `CaptureSettings` is what a backend reads of the config, as a Protocol: the config's
`IntegratedConfig` has every field, and the backends need no import of config/ to name it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Protocol


@dataclass(frozen=True)
class Flag:
    """One on/off feature of a capture: its profile() keyword (torch.profiler and
    torch_npu.profiler alike), our `integrated` field, and its one-word name (verl's `contents`)."""

    keyword: str
    field: str
    word: str


# in the order the keywords are passed and written into a capture's metadata (`options`)
FLAGS: tuple[Flag, ...] = (
    Flag("record_shapes", "profile_record_shapes", "shapes"),
    Flag("profile_memory", "profile_with_memory", "memory"),
    Flag("with_stack", "profile_with_stack", "stack"),
    Flag("with_modules", "profile_with_module", "module"),
    Flag("with_flops", "profile_with_flops", "flops"),
)
KEYWORDS: tuple[str, ...] = tuple(f.keyword for f in FLAGS)
# profile() keyword -> our field
FIELD_OF_KEYWORD: dict[str, str] = {f.keyword: f.field for f in FLAGS}
_BY_WORD = {f.word: f for f in FLAGS}


def fields_of_words(*words: str) -> dict[str, str]:
    """{word: our field} for the one-word names given, in their order (a framework's vocabulary,
    e.g. verl's `contents`)."""
    return {w: _BY_WORD[w].field for w in words}


class CaptureSettings(Protocol):
    """The `integrated` fields a capture backend reads, read-only (config.IntegratedConfig has
    them all)."""

    @property
    def profile_level(self) -> str: ...

    @property
    def profile_with_cpu(self) -> bool: ...

    @property
    def profile_with_npu(self) -> bool: ...

    @property
    def profile_record_shapes(self) -> bool: ...

    @property
    def profile_with_memory(self) -> bool: ...

    @property
    def profile_with_stack(self) -> bool: ...

    @property
    def profile_with_module(self) -> bool: ...

    @property
    def profile_with_flops(self) -> bool: ...

    @property
    def profile_analysis(self) -> bool: ...

    @property
    def profile_export_type(self) -> str: ...

    @property
    def mstx(self) -> bool: ...

    @property
    def mstx_domain_include(self) -> tuple[str, ...]: ...

    @property
    def mstx_domain_exclude(self) -> tuple[str, ...]: ...

    @property
    def l2_cache(self) -> bool: ...

    @property
    def aic_metrics(self) -> str | None: ...

    @property
    def data_simplification(self) -> bool: ...

    @property
    def export_after_run(self) -> bool: ...


@dataclass(frozen=True)
class CaptureOptions:
    """What one capture is asked to record, in the profilers' own terms, built from the config
    once (`from_settings`); each backend maps it onto its tool and notes what it cannot honour."""

    level: str                 # level_none | level0 | level1 | level2
    with_cpu: bool             # host activity
    with_device: bool          # device activity (NPU or CUDA)
    flags: Mapping[str, bool]  # profile() keyword -> on, for every FLAGS keyword, in FLAGS' order

    @classmethod
    def from_settings(cls, cfg: CaptureSettings) -> CaptureOptions:
        return cls(level=cfg.profile_level, with_cpu=bool(cfg.profile_with_cpu), with_device=bool(cfg.profile_with_npu),
                   flags={f.keyword: getattr(cfg, f.field) for f in FLAGS})
