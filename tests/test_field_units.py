"""Field names unique per unit across the row models (issue 32): a field's name in code means one
unit / kind in every model. Where an output name (analysis.db column, summary.json key, RunAnalysis
field) means two units, the field keeps it as its `name` (the outputs do not change) and has a name
of its own in code (`Field.code`): device_id (memory_peaks, memory_sites), capture_id (captures),
metric_ratio (stragglers), stream_id (idle_causes)."""
from __future__ import annotations

from collections import defaultdict

import pytest

from mindspeed_profiler.analysis.models import display
from mindspeed_profiler.analysis.models.questions import MODELS, markdown
from mindspeed_profiler.analysis.models.rows import Field, RowModel, UnknownField, each_capture, listed

RENAMED = (("memory_peaks", "device", "device_id"), ("memory_sites", "device", "device_id"),
           ("captures", "id", "capture_id"), ("stragglers", "metric", "metric_ratio"),
           ("idle_causes", "stream", "stream_id"))


def test_no_field_name_means_two_units():
    units: dict = defaultdict(lambda: defaultdict(set))
    for m in MODELS:
        for f in m.fields:
            units[f.code_name][f.unit].add(m.question)
    twofold = {n: {u: sorted(ms) for u, ms in d.items()} for n, d in units.items() if len(d) > 1}
    assert not twofold, f"a field name in code with two units (give one a Field.code): {twofold}"


def test_renamed_fields_keep_their_output_names():
    by_q = {m.question: m for m in MODELS}
    page = markdown()
    for q, out, code in RENAMED:
        f = next(f for f in by_q[q].fields if f.code == code)
        assert f.name == out and out in by_q[q].columns and code not in by_q[q].columns
        assert f"| {out} (in code: {code}) |" in page
    assert sum(bool(f.code) for m in MODELS for f in m.fields) == len(RENAMED)


def test_a_renamed_field_is_written_and_read_under_either_name():
    m = RowModel("t", "t", "captures[*].t", fields=(Field("stream", "id", "s", code="stream_id"),
                                                    Field("n", "count", "n")), select=each_capture(listed("t")))
    assert m.row(n=1, stream_id=7) == {"n": 1, "stream": 7} == m.row(n=1, stream=7)
    assert list(m.row(n=1, stream_id=7)) == ["n", "stream"]   # the order given (summary.json's)
    with pytest.raises(UnknownField):
        m.row(stream_id=7, stream=8)
    with pytest.raises(UnknownField, match="stream_id"):
        m.row(streams=7)
    raw = {"stream": 7, "n": 1}
    assert display.field(m, raw, "stream_id") == display.field(m, raw, "stream") == 7
    summary = {"captures": [{"path": "p", "t": [raw]}]}
    assert m.rows(summary) == [{"path": "p", "role": None, "rank": None, "stage": None, "stream": 7, "n": 1}]
    assert m.columns == ("capture_id", "stream", "n")
