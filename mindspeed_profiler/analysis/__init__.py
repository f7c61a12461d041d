"""Offline analysis of profiler output: no device, no torch / torch_npu, no runtime import.

    inputs/     kind -> (find, analyse): the input registry       parsing/   files in, tables out
    analyzers/  one module per question, the advisor               models/    row models, questions, display
    pipeline/   discover, collect (pool or Ray), one capture, the batch
    timeline/   segments -> the merged timeline (Chrome JSON, Perfetto protobuf), system tracks
    results/    summary.json (outputs), analysis.db (sqlite_export), report.html (report/),
                terminal tables (console), RunAnalysis (facade: one method per question)
"""
from __future__ import annotations

from typing import Any

__all__ = ["RunAnalysis", "Rows"]


def __getattr__(name: str) -> Any:   # lazy: `import mindspeed_profiler.analysis` stays cheap
    if name in __all__:
        from mindspeed_profiler.analysis.results import facade

        return getattr(facade, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
