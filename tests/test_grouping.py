"""analyzers/grouping.py's numpy helpers: the results of np.unique, np.isin and np.median, without
their costs (numpy >= 2.3's hashed np.unique; numpy.ma, which plain np.unique and np.median's NaN
check import: 10 ms of a cold `analyse`, issue 34)."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from mindspeed_profiler.analysis.analyzers.grouping import distinct, median, member


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint8])
def test_distinct_and_member_are_numpys(dtype):
    rng = np.random.default_rng(3)
    for n in (0, 1, 2, 17, 1000):
        a = rng.integers(0, 50 if dtype is np.uint8 else 10**6, n).astype(dtype)
        assert np.array_equal(distinct(a), np.unique(a)) and distinct(a).dtype == a.dtype
        x = rng.integers(0, 60, 200).astype(dtype)
        assert np.array_equal(member(x, distinct(a)), np.isin(x, a))


def test_median_is_numpys():
    rng = np.random.default_rng(5)
    cases = [[1.0], [3, 1], [5, 1, 4], [2.5, 2.5, 2.5, 1e300, -1e300], [np.inf, 1.0], [np.inf, -np.inf],
             list(rng.normal(size=101)), list(rng.normal(size=100)), rng.integers(-9, 9, 64)]
    for c in cases:
        with np.errstate(invalid="ignore"):   # (inf - inf: both say so)
            want = float(np.median(np.asarray(c, dtype=np.float64)))
            got = median(c)
        assert (np.isnan(want) and np.isnan(got)) or got == want, c
    assert np.isnan(median([])) and np.isnan(median([1.0, np.nan, 2.0]))


def test_a_cold_analysis_leaves_numpy_ma_unloaded(tmp_path):
    """A real GPU trace with [memory] events (HTA's control trace) analysed in a fresh process, the
    report written: numpy.ma is never imported."""
    from test_forked import _memory_trace

    d = _memory_trace(tmp_path).parent
    code = ("import sys; from mindspeed_profiler.commands import analyse as a; a.main([sys.argv[1], '-q', '-j', '1']); "
            "print('numpy.ma' in sys.modules, 'numpy' in sys.modules)")
    p = subprocess.run([sys.executable, "-c", code, str(d)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split()[-2:] == ["False", "True"], p.stdout
