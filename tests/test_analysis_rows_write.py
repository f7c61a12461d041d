"""Rows written through their model (analysis/models/rows.py: RowModel.row / part / put, issue 32): a row
is built by name, an unknown name is refused with the model, the name and the closest declared one,
declared defaults are filled, and put() stores rows where the model's select() reads them back."""
from __future__ import annotations

import pytest

from mindspeed_profiler.analysis.models.questions import MODELS
from mindspeed_profiler.analysis.models.rows import Field, RowModel, UnknownField, block, each_capture, inside, listed

M = RowModel("demo", "thing", "captures[*].demo[*]", select=each_capture(listed("demo")), fields=(
    Field("name", "text", "the thing"), Field("total_us", "us", "its time"),
    Field("count", "count", "how often", default=0), Field("n", "count", "computed", computed=True),
    Field("inner_us", "us", "nested", key=("inner", "us"))))


def test_row_keeps_the_callers_order_and_fills_defaults():
    r = M.row(total_us=1.5, name="a")
    assert list(r) == ["total_us", "name", "count"] and r["count"] == 0
    assert M.row(name="a", count=3)["count"] == 3
    assert M.row(n=2) == {"n": 2, "count": 0}   # a computed field: for the select() that computes the rows


@pytest.mark.parametrize("bad, hint", [("totl_us", "'total_us'"), ("inner_us", "'inner'")])
def test_an_unknown_name_is_refused_naming_model_name_and_closest(bad, hint):
    with pytest.raises(UnknownField) as e:
        M.row(name="a", **{bad: 1})
    msg = str(e.value)
    assert "'demo'" in msg and repr(bad) in msg and hint in msg
    assert isinstance(e.value, KeyError) and isinstance(e.value, ValueError)


def test_nested_fields_are_written_as_a_part():
    r = M.row(name="a", inner=M.part("inner", us=2.0))
    assert M.fields[-1].get(r) == 2.0
    with pytest.raises(UnknownField, match="'inner'"):
        M.part("inner", usx=1)
    with pytest.raises(UnknownField):
        M.part("outer", us=1)


def test_put_stores_rows_where_select_reads_them():
    cap: dict = {}
    M.put(cap, [M.row(name="a", total_us=1.0)])
    assert [raw for _, _, raw in M.select({"captures": [cap]})] == cap["demo"]
    b = RowModel("b", "x", "y", select=each_capture(block("blk")), fields=(Field("a", "us", "a"),))
    b.put(cap, b.row(a=1.0))
    assert cap["blk"] == {"a": 1.0}
    i = RowModel("i", "x", "y", select=each_capture(inside("outer", "rows")), fields=(Field("a", "us", "a"),))
    i.put(cap, [i.row(a=2.0)])
    assert [raw for _, _, raw in i.select({"captures": [cap]})] == [{"a": 2.0}]
    own = RowModel("own", "x", "y", select=lambda s: iter(()), fields=(Field("a", "us", "a"),))
    with pytest.raises(TypeError, match="'own'"):
        own.put(cap, [])


def test_every_model_accepts_its_own_declared_names():
    for m in MODELS:
        flat = {f.path[0]: None for f in m.fields if len(f.path) == 1}
        assert m.row(**flat).keys() >= flat.keys(), m.question
