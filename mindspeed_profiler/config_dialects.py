"""Kept for imports written before the config package: the dialects are
mindspeed_profiler.config.dialects (verl.py, rlinf.py, reader.py); every name is importable here."""
from __future__ import annotations

from mindspeed_profiler.config.dialects import (  # noqa: F401
    DIALECT_TITLES,
    STAGES_KEY,
    Note,
    Translation,
    collect_notes,
    find_block,
    foreign_layout,
    translate,
    translate_kind,
)
from mindspeed_profiler.config.dialects.rlinf import (  # noqa: F401
    RLINF_PROFILING_KEYS,
    RLINF_TRACE_FILE,
    RLINF_TRACER_KEYS,
    from_rlinf,
)
from mindspeed_profiler.config.dialects.verl import (  # noqa: F401
    VERL_CONTENTS,
    VERL_DEFAULT_SAVE_PATH,
    VERL_GLOBAL_KEYS,
    VERL_ROLE_KEYS,
    VERL_ROLE_PATHS,
    VERL_STAGES,
    VERL_TOOL_KEYS,
    VERL_TOOLS,
    VERL_TORCH_UNMAPPED_CONTENTS,
    from_verl,
)
from mindspeed_profiler.config.load import split_overrides  # noqa: F401

__all__ = ["Translation", "translate", "translate_kind", "find_block", "collect_notes", "split_overrides", "DIALECT_TITLES"]
