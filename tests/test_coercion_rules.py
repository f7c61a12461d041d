"""The one coercion module (analysis/parsing/numbers.py, issue 32): each function's rule for a
bool, NaN / inf, number text and junk, as its table says."""
from __future__ import annotations

import math

import pytest

from mindspeed_profiler.analysis.parsing.numbers import finite_number, float_or_nan, int_or, integer, real, real_or

NAN, INF = float("nan"), float("inf")


@pytest.mark.parametrize("v, want", [(True, None), (NAN, None), (INF, None), ("1.5", None), ("x", None),
                                     (None, None), (2, 2.0), (1.5, 1.5), (10**400, None)])
def test_finite_number_takes_json_numbers_only(v, want):
    assert finite_number(v) == want


@pytest.mark.parametrize("v, want", [(True, 7.0), (NAN, 7.0), (INF, 7.0), ("inf", 7.0), ("1.5", 1.5), (" 2\t", 2.0),
                                     ("junk", 7.0), (None, 7.0), ("", 7.0), (3, 3.0)])
def test_real_or_gives_the_default_for_anything_real_refuses(v, want):
    assert real_or(v, 7.0) == want


@pytest.mark.parametrize("v, want", [(True, -1), (False, -1), (3, 3), (3.0, -1), ("3", -1), (None, -1)])
def test_int_or_takes_ints_never_bools(v, want):
    assert int_or(v) == want


@pytest.mark.parametrize("v, want", [(True, None), (NAN, None), (INF, None), ("12", 12), ("x", None), (2.9, 2)])
def test_integer(v, want):
    assert integer(v) == want


def test_float_or_nan_keeps_pythons_float_for_event_times():
    assert float_or_nan(True) == 1.0 and float_or_nan("2.5") == 2.5 and float_or_nan(INF) == INF
    assert math.isnan(float_or_nan(None)) and math.isnan(float_or_nan("junk")) and math.isnan(float_or_nan([]))


def test_real_refuses_bools_and_non_finite():
    for v in (True, NAN, INF, "nan", "junk"):
        with pytest.raises(ValueError):
            real(v)


def test_a_callers_numbers_of_any_library_and_the_problems_said():
    """caller_number / caller_int: what the sample writer takes from an engine or a user (rollout/checks.py)."""
    import numpy as np
    import torch

    from mindspeed_profiler.analysis.parsing.numbers import caller_int, caller_number, ns_of_seconds

    problems: list[str] = []
    assert caller_number("t", np.float32(1.5), problems) == 1.5 and caller_number("t", torch.tensor(2.0), problems) == 2.0
    assert caller_number("t", None, problems) is None and problems == []
    for bad in (True, "1.5", b"1", torch.tensor([1.0, 2.0]), NAN, 10**400):
        assert caller_number("t", bad, problems) is None, bad
    assert len(problems) == 6 and problems[0] == "t: True (bool) is not a number" and problems[4] == "t: nan is not a finite number"
    assert caller_int(np.int64(7)) == 7 and caller_int(torch.tensor(3)) == 3
    assert caller_int(True) is None and caller_int(2.0) is None and caller_int("2") is None
    assert ns_of_seconds(1.5) == 1_500_000_000 and ns_of_seconds(None) is None
