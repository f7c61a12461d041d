"""RunAnalysis' question methods are made from the row models (facade.py, add_question_methods):
each model with a `method` name has its method, with a docstring, returning the model's rows; a
new model's method follows from its `method=` alone."""
from __future__ import annotations

import inspect

from mindspeed_profiler.analysis.models import questions as q
from mindspeed_profiler.analysis.results.facade import METHOD_DOCS, RunAnalysis, add_question_methods
from mindspeed_profiler.analysis.models.rows import Field, RowModel, each_capture, listed

SUMMARY = {"captures": [{"path": "a", "role": "actor", "rank": 0, "stage": "update", "status": "ok",
                         "steps": [{"step": 1, "dur_us": 5.0}]}], "runs": ["r1"]}


def test_every_model_with_a_method_has_it_with_its_docstring():
    for m in q.MODELS:
        if not m.method:
            continue
        f = getattr(RunAnalysis, m.method, None)
        assert callable(f), f"RunAnalysis has no method {m.method} for the model {m.question}"
        assert (f.__doc__ or "").strip(), f"RunAnalysis.{m.method} has no docstring"
        assert f.__name__ == m.method and f.__qualname__ == f"RunAnalysis.{m.method}"
        assert list(inspect.signature(f).parameters)[0] == "self"
    assert set(METHOD_DOCS) <= {m.method for m in q.MODELS}, "METHOD_DOCS names a method no model has"


def test_a_method_returns_its_models_rows():
    ra = RunAnalysis.from_summary(SUMMARY)
    for m in q.MODELS:
        if m.method and m.method != "slow_ranks":
            assert getattr(ra, m.method)() == m.rows(SUMMARY), m.method
    assert ra.steps()[0]["dur_us"] == 5.0 and ra.runs()[0]["run_id"] == "r1"


def test_a_new_models_method_follows_from_its_method_name():
    model = RowModel("my question", "thing", "captures[*].things[*]", table="things", method="things",
                     select=each_capture(listed("things")), fields=(Field("n", "count", "how many"),))

    class Mine(RunAnalysis):
        pass

    add_question_methods(Mine, [model, q.SLOW_RANKS])
    ra = Mine.from_summary({"captures": [{"path": "p", "things": [{"n": 3}]}]})
    assert ra.things() == [{"path": "p", "role": None, "rank": None, "stage": None, "n": 3}]
    assert "my question" in Mine.things.__doc__
    assert "slow_ranks" not in vars(Mine)      # a method the class defines itself is kept
