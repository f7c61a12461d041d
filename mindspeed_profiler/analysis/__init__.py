"""Offline analysis of profiler output: no device, no torch / torch_npu, no runtime import.

    discover.py   what is where (asks the input registry)   inputs/     kind -> (find, analyse)
    parsing/      files in, tables out                       analyzers/  one module per question
    batch.py      the batch (discover, prepare, analyse in a pool, cross-capture tables, outputs)
    pool.py       worker processes    capture.py  one capture, in a worker    merge.py  segments -> timeline
    outputs.py    summary.json        report/     report.html (Jinja2)       sqlite_export.py  analysis.db
    console.py    terminal tables     facade.py   RunAnalysis: one method per question, for notebooks
"""
from __future__ import annotations

from typing import Any

__all__ = ["RunAnalysis", "Rows"]


def __getattr__(name: str) -> Any:   # lazy: `import mindspeed_profiler.analysis` stays cheap
    if name in __all__:
        from . import facade

        return getattr(facade, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
