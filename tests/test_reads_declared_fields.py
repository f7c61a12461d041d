"""The terminal and report.html read only fields a row model declares: every string key that
console.py, display.py and report/*.py read from a row (`row["key"]`, `row.get("key")`) is a field of
a question's model, one of its older names, a key of a field's path, a block a model holds or the
place its rows live (summary_fields.declared_names(): the questions' models and the summary's own
record, timeline and capture blocks, declared in analysis/models/summary_fields.py)."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from mindspeed_profiler.analysis.models import display
from mindspeed_profiler.analysis.models import questions as q
from mindspeed_profiler.analysis.models.rows import UnknownField
from mindspeed_profiler.analysis.models.summary_fields import SUMMARY, TIMELINE, declared_names

ANALYSIS = Path(display.__file__).parent.parent
READERS = [ANALYSIS / "results" / "console.py", ANALYSIS / "models" / "display.py",
           *sorted((ANALYSIS / "results" / "report").glob("*.py"))]


def keys_read(source: str) -> list[tuple[str, int]]:
    """(key, line) of each string key read: a subscript that loads, or .get / .pop / .setdefault."""
    out = []
    for n in ast.walk(ast.parse(source)):
        if isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Load) and isinstance(n.slice, ast.Constant) \
                and isinstance(n.slice.value, str):
            out.append((n.slice.value, n.lineno))
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in ("get", "pop", "setdefault") \
                and n.args and isinstance(n.args[0], ast.Constant) and isinstance(n.args[0].value, str):
            out.append((n.args[0].value, n.lineno))
    return out


def undeclared(source: str) -> list[tuple[str, int]]:
    names = declared_names()
    return [(k, line) for k, line in keys_read(source) if k not in names]


@pytest.mark.parametrize("path", READERS, ids=lambda p: p.name)
def test_console_and_report_read_only_declared_fields(path):
    bad = undeclared(path.read_text())
    assert not bad, f"{path.name} reads names no row model declares (declare them in the question's model, " \
                    f"or a summary-level one in analysis/models/summary_fields.py): {bad}"


def test_a_read_of_an_undeclared_field_is_found():
    src = "def f(c, summary):\n    return c.get('wall_us'), c['bogus_total_us'], summary.get('counts').get('nope')\n"
    assert undeclared(src) == [("bogus_total_us", 2), ("nope", 2)]
    assert undeclared("row['x'] = 1\n") == []     # a write is no read


def test_field_reads_through_the_model():
    summary = {"counts": {"found": 3}, "options": {"threshold": 1.5}, "timeline": {"n_iterations": 4}}
    assert display.field(SUMMARY, summary, "counts_found") == 3
    assert display.field(SUMMARY, summary, "options_threshold") == 1.5
    assert display.field(SUMMARY, {}, "counts_ok") is None
    assert display.field(TIMELINE, summary["timeline"], "n_iterations") == 4
    assert display.field(q.COMMUNICATION, {"device": {"exposed_us": 2.0}}, "device_exposed_us") == 2.0
    with pytest.raises(UnknownField, match="counts_fund"):
        display.field(SUMMARY, summary, "counts_fund")
