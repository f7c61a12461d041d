"""What of `profiler_config.integrated` an inference engine's capture cannot honour, as notes for the
capture metadata (never silence). Pure: the config in, one sentence per option out; each engine
module adds its own (vllm_engine.notes, sglang_engine.notes) to these shared ones.
"""
from __future__ import annotations

from dataclasses import dataclass

from mindspeed_profiler.backends.honour import unhonoured
from mindspeed_profiler.core.capture_options import CaptureSettings


@dataclass(frozen=True)
class EngineTool:
    """An engine seen as a capture tool, for backends/honour.py's notes on backend-specific options
    (l2_cache, aic_metrics, profile_export_type, ...): it honours none of them."""

    name: str          # vllm | vllm-ascend | sglang
    tool: str          # in words: "vLLM's torch.profiler"
    honours: tuple[str, ...] = ()


def shared_notes(cfg: CaptureSettings, tool: EngineTool, *, warmup_steps: int = 0) -> list[str]:
    """The notes every engine shares: backend-specific options, markers, warm-up, level_none."""
    notes = unhonoured(tool, cfg)   # type: ignore[arg-type]  (duck-typed: name, tool, honours)
    if cfg.profile_level == "level_none":
        notes.append(f"profile_level: level_none (annotations only) is not available in {tool.tool}: "
                     "the engine's capture records every op")
    if cfg.mstx:
        notes.append("mstx: true: our markers (stage ranges) are drawn in the training process, not in the engine's "
                     "workers")
    if warmup_steps:
        notes.append(f"warmup_steps: {warmup_steps}: an engine capture starts at the stage call's entry, "
                     "without warm-up")
    return notes


def flag_note(field: str, value: object, why: str) -> str:
    """One note for a flag the engine cannot take: `<field>: <value> <why>`."""
    shown = "true" if value is True else "false" if value is False else str(value)
    return f"{field}: {shown} {why}"
