"""RLinf as it ships on PyPI (rlinf 0.3.0), and its own verdict as the oracle for `cluster.profiling`.

- Fast: a TABLE of `cluster.profiling` blocks with RLinf's verdict (recorded); load_config must give
  the same verdict on `{"cluster": {"profiling": block}}`. The recorded key lists of
  config/dialects/rlinf.py are checked per backend.
- Slow: tests/rlinf_oracle.py in `.venv-rlinf` (made by `./run test`) gives RLinf's own verdicts,
  its config classes' fields and the nsys tokens it renders; they must be the recorded ones. A new
  RLinf release fails here first. Without `.venv-rlinf` these skip, saying why (a failure under
  MSP_REQUIRE_FRAMEWORKS=1, as CI runs).

RLinf 0.3.0 has no tracer (no `rlinf.scheduler.manager.tracer`, no `cluster.tracer` in its
ClusterConfig, which ignores the key): the tracer's JSONL reader is checked on traces written by
RLinf's repository code in tests/test_rlinf_traces.py; the slow test records that the release
still has none, so that one that adds it fails here and gets its own test.
"""
from __future__ import annotations

import pytest

from conftest import REPO_ROOT
from frameworks import framework_python, run_json
from mindspeed_profiler.config import load_config
from mindspeed_profiler.config.dialects import collect_notes
from mindspeed_profiler.config.dialects import rlinf as RL
from mindspeed_profiler.config.errors import ProfilerConfigError

ORACLE = REPO_ROOT / "tests" / "rlinf_oracle.py"
NSIGHT = {"backend": "nsight", "worker_groups": ["ActorGroup"]}

# (id, cluster.profiling, RLinf 0.3.0's verdict: accepted?)
TABLE: list[tuple[str, dict, bool]] = [
    ("nsight_groups", NSIGHT, True),
    ("nsight_one_group_string", {"backend": "nsight", "worker_groups": "ActorGroup", "steps": [3]}, True),
    ("nsight_all_groups", {"backend": "nsight", "worker_groups": "all"}, True),
    ("nsight_three_steps", {**NSIGHT, "steps": [3, 10, 50]}, True),
    ("nsight_options_flags", {**NSIGHT, "options": {"trace": "cuda,nvtx", "cuda-memory-usage": True}, "flags": ["x"]}, True),
    ("nsight_stop_alias", {**NSIGHT, "options": {"stop-on-range-end": True}}, True),
    ("nsight_disabled", {**NSIGHT, "enabled": False}, True),
    ("nsight_output_dir", {**NSIGHT, "output_dir": "/tmp/prof", "steps": []}, True),
    ("rocprof", {"backend": "rocprof_sys", "worker_groups": ["ActorGroup"], "args": {"trace": "true"},
                 "env": {"ROCPROFSYS_SAMPLING_FREQ": "100"}}, True),
    ("no_backend", {"worker_groups": ["ActorGroup"]}, False),
    ("unknown_backend", {"backend": "nsys"}, False),
    ("negative_step", {**NSIGHT, "steps": [-1]}, False),
    ("steps_not_a_list", {**NSIGHT, "steps": 3}, False),
    ("both_range_ends", {**NSIGHT, "options": {"stop-on-range-end": True, "capture-range-end": "stop"}}, False),
    ("unknown_key", {**NSIGHT, "colour": "red"}, False),
    ("options_for_rocprof", {"backend": "rocprof_sys", "options": {"trace": "cuda"}}, False),
    ("args_for_nsight", {**NSIGHT, "args": {"trace": "true"}}, False),
    ("groups_not_names", {**NSIGHT, "worker_groups": 5}, False),
    ("output_twice", {**NSIGHT, "options": {"o": "a", "output": "b"}}, False),
    ("flag_and_option", {**NSIGHT, "flags": ["trace"], "options": {"trace": "cuda"}}, False),
]
# ours, not RLinf's: the system backends we add (RLinf refuses the names)
OURS_ONLY = [("msprof", {"backend": "msprof", "worker_groups": ["ActorGroup"]}),
             ("py_spy", {"backend": "py_spy", "worker_groups": ["ActorGroup"]})]


def _ours(block: dict) -> tuple[bool, str]:
    with collect_notes():
        try:
            load_config({"cluster": {"profiling": dict(block)}}, check_paths=False)
            return True, ""
        except ProfilerConfigError as exc:
            # at RLinf's key, or at the system section it becomes (the system section's own checks)
            assert all(p.startswith(("cluster.profiling", "profiler_config.system")) for p, _ in exc.problems), exc.problems
            return False, str(exc)


@pytest.mark.parametrize("case", TABLE, ids=[t[0] for t in TABLE])
def test_we_accept_what_rlinf_accepts_and_refuse_what_it_refuses(case):
    name, block, rlinf_accepts = case
    ours, error = _ours(block)
    assert ours == rlinf_accepts, f"{name}: RLinf {'accepts' if rlinf_accepts else 'refuses'} it, we {error or 'accept it'}"


@pytest.mark.parametrize("case", OURS_ONLY, ids=[t[0] for t in OURS_ONLY])
def test_the_backends_we_add_load(case):
    assert _ours(case[1])[0]


def test_three_steps_capture_every_step_here_where_rlinf_captures_the_first():
    """RLinf 0.3.0 adds capture-range-end=stop when `steps` is set: nsys then captures only the
    first listed step. Here the option is left out (repeat:N) and a note says so."""
    with collect_notes() as notes:
        cfg = load_config({"cluster": {"profiling": {**NSIGHT, "steps": [3, 10, 50],
                                                      "options": {"capture-range-end": "stop"}}}}, check_paths=False)
    assert cfg.system.steps == (4, 11, 51) and "capture-range-end" not in cfg.system.options
    assert any("captures only the first step" in what for _, _, what in notes)


# ------------------------------------------------------------------ against the installed RLinf (slow)


@pytest.fixture(scope="module")
def rlinf_says() -> dict:
    python = framework_python("rlinf")
    cases = [{"id": n, "profiling": b} for n, b, _ in TABLE] + [{"id": f"ours:{n}", "profiling": b} for n, b in OURS_ONLY]
    return run_json(python, ORACLE, {"cases": cases}, timeout=600)


@pytest.mark.slow
def test_recorded_verdicts_are_rlinfs_own(rlinf_says):
    assert rlinf_says["rlinf"] == RL.RLINF_RELEASE
    got = {r["id"]: r for r in rlinf_says["results"]}
    assert [(n, ok, got[n]["error"]) for n, _, ok in TABLE if got[n]["accepted"] != ok] == []
    assert not any(got[f"ours:{n}"]["accepted"] for n, _ in OURS_ONLY)
    # RLinf's own rendering of the three-step case: the stop that loses steps 10 and 50
    assert got["nsight_three_steps"]["options"]["capture-range-end"] == "stop"
    assert "--capture-range-end=stop" in got["nsight_three_steps"]["tokens"]


@pytest.mark.slow
def test_recorded_key_lists_are_rlinfs_classes(rlinf_says):
    keys = rlinf_says["keys"]
    assert {b: set(k) for b, k in keys.items() if b in RL.RLINF_BACKEND_KEYS} == \
        {b: set(k) for b, k in RL.RLINF_BACKEND_KEYS.items()}
    assert set(RL.RLINF_PROFILING_KEYS) == set().union(*RL.RLINF_BACKEND_KEYS.values())
    assert rlinf_says["tracer"] is False   # a release with a tracer: test its real Tracer's output here
