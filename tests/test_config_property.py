"""Property-based: random and mutated configs either load or raise ProfilerConfigError, nothing else."""
from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mindspeed_profiler import load_config
from mindspeed_profiler.config import (
    INTEGRATED_FIELDS,
    SYSTEM_FIELDS,
    TRACER_FIELDS,
    ProfilerConfig,
    ProfilerConfigError,
)
from mindspeed_profiler.capture.stages import BUILTIN_STAGES

KEYS = list(INTEGRATED_FIELDS) + list(TRACER_FIELDS) + list(SYSTEM_FIELDS) + ["integrated", "tracer", "system"]

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-5, 100), st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12), st.sampled_from(["all", "level0", "level_none", "db", "text", "nsight", "rocprof_sys",
                                           "auto", "npu", "torch", "0,1", "", "stop", "repeat:2", "cudaProfilerApi",
                                           "/dev/null", "/proc/x", "./profiler_data", *BUILTIN_STAGES]),
)
values = st.recursive(
    scalars,
    lambda children: st.one_of(st.lists(children, max_size=4),
                               st.dictionaries(st.one_of(st.sampled_from(KEYS), st.text(max_size=8)), children, max_size=5)),
    max_leaves=12,
)
fields_of = {"integrated": INTEGRATED_FIELDS, "tracer": TRACER_FIELDS, "system": SYSTEM_FIELDS}


@st.composite
def mutated_configs(draw):
    """Start from a valid-looking block and mutate some fields with random values."""
    block = {}
    for section in draw(st.sets(st.sampled_from(["integrated", "tracer", "system"]))):
        names = draw(st.sets(st.sampled_from(list(fields_of[section])), max_size=6))
        sec = {name: draw(values) for name in names}
        if section == "system" and draw(st.booleans()):
            sec["backend"] = draw(st.sampled_from(["nsight", "rocprof_sys"]))
        block[section] = sec
    if draw(st.booleans()):
        block = {"profiler_config": block, "rl_config": {"x": 1}}
    return block


def check(source, overrides=()):
    try:
        cfg = load_config(source, overrides)
    except ProfilerConfigError as exc:
        assert exc.problems and all(isinstance(p, str) and isinstance(m, str) and m for p, m in exc.problems)
        return
    assert isinstance(cfg, ProfilerConfig)
    # a valid config survives its own normalized form
    assert load_config(cfg.to_dict(), check_paths=False) == cfg


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(values)
def test_random_values(source):
    check(source)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_configs())
def test_mutated_configs(source):
    check(source)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["integrated.", "profiler_config.tracer.", "system.", "+", ""]),
                          st.sampled_from(KEYS + ["a.b", ""]), st.text(max_size=10)), max_size=4))
def test_random_overrides(parts):
    check({"integrated": {"profile": False}}, [f"{prefix}{key}={value}" for prefix, key, value in parts])
