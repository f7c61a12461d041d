"""Validation of `profiler_config.system` for every backend, table-driven: what loads (and how it is
normalized) and what is refused, at which path, with which words in the message."""
from __future__ import annotations

import pytest

from mindspeed_profiler import load_config
from mindspeed_profiler.config import ProfilerConfigError

P = "profiler_config.system"


def load(**system):
    return load_config({"system": system}, check_paths=False).system


@pytest.mark.parametrize("system,check", [
    ({"backend": "nsight", "options": {"t": "cuda", "sample": "process-tree"}, "flags": ["python-backtrace"]},
     lambda s: dict(s.options) == {"t": "cuda", "sample": "process-tree"} and s.flags == ("python-backtrace",)),
    ({"backend": "nsight", "steps": [10, 3, 50]}, lambda s: s.steps == (3, 10, 50)),
    ({"backend": "nsight", "steps": [3, 10, 50], "options": {"capture-range": "cudaProfilerApi",
                                                              "capture-range-end": "repeat:3"}}, lambda s: True),
    ({"backend": "nsight", "steps": [3, 10], "options": {"capture-range-end": "repeat"}}, lambda s: True),
    ({"backend": "nsight", "steps": [3, 10], "options": {"capture-range-end": "repeat-shutdown:5"}}, lambda s: True),
    ({"backend": "nsight", "steps": [3], "options": {"capture-range-end": "stop-shutdown"}}, lambda s: True),
    ({"backend": "rocprof_sys", "args": {"T": "hip", "output-format": "json"}, "env": {"ROCPROFSYS_SAMPLING_FREQ": 100}},
     lambda s: s.env["ROCPROFSYS_SAMPLING_FREQ"] == "100"),
    ({"backend": "msprof", "options": {"aic-metrics": "PipeUtilization", "task-time": "on"}}, lambda s: True),
    ({"backend": "py_spy", "args": {"rate": 50}, "flags": ["native", "gil"], "steps": [2, 4]},
     lambda s: s.args["rate"] == "50" and s.steps == (2, 4)),
    ({"backend": "PY_SPY"}, lambda s: s.backend == "py_spy"),
    # worker_groups: a list, `all` (also in a list), null or [] (none)
    ({"backend": "py_spy", "worker_groups": ["actor", "ReferenceGroup"]}, lambda s: s.worker_groups == ("actor", "ReferenceGroup")),
    ({"backend": "py_spy", "worker_groups": "ALL"}, lambda s: s.worker_groups == "all"),
    ({"backend": "py_spy", "worker_groups": ["actor", "all"]}, lambda s: s.worker_groups == "all"),
    ({"backend": "py_spy", "worker_groups": None}, lambda s: s.worker_groups is None),
    ({"backend": "py_spy", "worker_groups": []}, lambda s: s.worker_groups == ()),
    ({"enabled": False, "steps": [1, 2], "options": {"capture-range-end": "stop"}}, lambda s: s.enabled is False),
], ids=lambda v: str(v)[:60] if isinstance(v, dict) else "")
def test_loads(system, check):
    assert check(load(**system))


@pytest.mark.parametrize("system,path,words", [
    # fields a backend does not read
    ({"backend": "rocprof_sys", "options": {"t": "cuda"}}, "options", ["nsys profile options (backend: nsight)",
                                                                       "msprof options (backend: msprof)", "for rocprof_sys use args"]),
    ({"backend": "rocprof_sys", "flags": ["x"]}, "flags", ["nsys profile flags (backend: nsight)", "for rocprof_sys use args"]),
    ({"backend": "nsight", "args": {"T": "hip"}}, "args", ["rocprof-sys-python arguments (backend: rocprof_sys)",
                                                           "py-spy record arguments (backend: py_spy)", "for nsight use options and flags"]),
    ({"backend": "msprof", "flags": ["x"]}, "flags", ["py-spy record flags (backend: py_spy)", "for msprof use options"]),
    ({"backend": "msprof", "args": {"x": "1"}}, "args", ["for msprof use options"]),
    ({"backend": "py_spy", "options": {"rate": 10}}, "options", ["for py_spy use args and flags"]),
    # keys the backend sets itself
    ({"backend": "nsight", "options": {"o": "/tmp/x"}}, "options.o", ["set by mindspeed-profiler", "remove it"]),
    ({"backend": "nsight", "options": {"output": "/tmp/x"}}, "options.output", ["set by mindspeed-profiler"]),
    ({"backend": "msprof", "options": {"output": "/tmp/x"}}, "options.output", ["set by mindspeed-profiler"]),
    ({"backend": "msprof", "options": {"application": "python"}}, "options.application", ["set by mindspeed-profiler"]),
    ({"backend": "py_spy", "args": {"format": "speedscope"}}, "args.format", ["set by mindspeed-profiler"]),
    ({"backend": "py_spy", "args": {"pid": "12"}}, "args.pid", ["set by mindspeed-profiler"]),
    # dashes, flag = value, flag and option at once
    ({"backend": "py_spy", "args": {"--rate": 10}}, "args.--rate", ["without dashes"]),
    ({"backend": "py_spy", "flags": ["--native"]}, "flags", ["without dashes"]),
    ({"backend": "py_spy", "flags": ["rate=10"]}, "flags", ["carries a value"]),
    ({"backend": "py_spy", "flags": ["rate"], "args": {"rate": 10}}, "flags", ["both as a flag and as an option"]),
    # steps: tools that cannot be limited to steps, by name
    ({"backend": "rocprof_sys", "steps": [3]}, "steps", ["rocprof_sys backend cannot be limited to training steps"]),
    ({"backend": "msprof", "steps": [3]}, "steps", ["msprof backend cannot be limited to training steps",
                                                    "profiler_config.integrated"]),
    # nsight steps: every listed step must be captured
    ({"backend": "nsight", "steps": [3, 10, 50], "options": {"capture-range-end": "stop"}}, "options.capture-range-end",
     ["only step 3 would be captured", "repeat:3"]),
    ({"backend": "nsight", "steps": [3, 10], "options": {"capture-range-end": "stop-shutdown"}}, "options.capture-range-end",
     ["'stop-shutdown' with 2 steps", "only step 3"]),
    ({"backend": "nsight", "steps": [3, 10, 50], "options": {"capture-range-end": "repeat:2"}}, "options.capture-range-end",
     ["only the first 2 range(s)", "steps [50] would be missing"]),
    ({"backend": "nsight", "steps": [3], "options": {"capture-range-end": "none"}}, "options.capture-range-end",
     ["capture from step 3 to the end"]),
    ({"backend": "nsight", "steps": [3], "options": {"capture-range": "nvtx"}}, "options.capture-range",
     ["must be cudaProfilerApi"]),
    # worker_groups and steps shapes
    ({"backend": "py_spy", "worker_groups": "actor"}, "worker_groups", ["write a list, even for one group: [actor]"]),
    ({"backend": "py_spy", "worker_groups": "actor,reference"}, "worker_groups", ["is not a list: write [a, b]"]),
    ({"backend": "py_spy", "worker_groups": ["actor", "actor"]}, "worker_groups", ["must not repeat"]),
    ({"backend": "py_spy", "worker_groups": [""]}, "worker_groups", ["list of worker group names"]),
    ({"backend": "py_spy", "steps": [0]}, "steps", ["integers >= 1"]),
    ({"backend": "py_spy", "steps": [2, 2]}, "steps", ["must not repeat"]),
    ({"backend": "perf"}, "backend", ["allowed: nsight, rocprof_sys, msprof, py_spy"]),
    ({"backend": "py_sp"}, "backend", ["did you mean 'py_spy'"]),
], ids=lambda v: str(v)[:60] if isinstance(v, dict) else "")
def test_refused(system, path, words):
    with pytest.raises(ProfilerConfigError) as e:
        load(**system)
    found = dict(e.value.problems)
    assert f"{P}.{path}" in found, e.value.problems
    for w in words:
        assert w in found[f"{P}.{path}"], (w, found[f"{P}.{path}"])


def test_every_problem_of_the_section_is_reported_together():
    with pytest.raises(ProfilerConfigError) as e:
        load(backend="msprof", steps=[2], flags=["x"], options={"output": "/x"}, worker_groups="actor")
    assert sorted(p for p, _ in e.value.problems) == [f"{P}.flags", f"{P}.options.output", f"{P}.steps", f"{P}.worker_groups"]


def test_unwritable_output_dir_only_when_something_is_wrapped(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(ProfilerConfigError, match="system.output_dir"):
        load_config({"system": {"backend": "py_spy", "worker_groups": ["actor"], "output_dir": str(blocker)}})
    with pytest.raises(ProfilerConfigError, match="system.output_dir"):   # the default <save>/system too
        load_config({"integrated": {"profile_save_path": str(blocker)}, "system": {"backend": "py_spy", "worker_groups": "all"}})
    # nothing wrapped, or disabled: nothing will be written there, nothing to check
    load_config({"integrated": {"profile_save_path": str(blocker)}, "system": {"backend": "py_spy"}})
    load_config({"system": {"backend": "py_spy", "enabled": False, "output_dir": str(blocker)}})
