"""Rendering of system-profiler command lines (pure, table-driven): the RLinf seed's rules, each
backend's whole command line, and the environment it derives."""
from __future__ import annotations

import shlex

import pytest

from mindspeed_profiler import load_config
from mindspeed_profiler.system.backends import system_backend, system_backend_names
from mindspeed_profiler.system.render import render
from mindspeed_profiler.system.spec import WorkerSpec

PY = ["/usr/bin/python3", "default_worker.py", "--node-ip-address=10.0.0.1"]


@pytest.mark.parametrize("options,flags,short,want", [
    # the seed's nsight example: options {t, sample, backtrace, capture-range, capture-range-end}, flags [python-backtrace]
    ({"t": "cuda,cudnn,cublas,nvtx,osrt", "sample": "process-tree", "backtrace": "fp",
      "capture-range": "cudaProfilerApi", "capture-range-end": "stop"}, ["python-backtrace"], True,
     ["--python-backtrace", "-t", "cuda,cudnn,cublas,nvtx,osrt", "--sample=process-tree", "--backtrace=fp",
      "--capture-range=cudaProfilerApi", "--capture-range-end=stop"]),
    # the seed's rocprof_sys example: args {T, output-format}
    ({"T": "hip,hsa,rccl", "output-format": "json"}, [], True, ["-T", "hip,hsa,rccl", "--output-format=json"]),
    # the seed's rules one by one: one letter -> -k value, longer -> --key=value, flags -> --flag
    ({"t": "cuda"}, [], True, ["-t", "cuda"]),
    ({"backtrace": "fp"}, [], True, ["--backtrace=fp"]),
    ({}, ["python-backtrace"], True, ["--python-backtrace"]),
    # flags first, then options, each in its given order; a one-letter flag is -x (as RLinf renders it)
    ({"b": "2", "a": "1"}, ["z", "yy"], True, ["-z", "--yy", "-b", "2", "-a", "1"]),
    # msprof: always --key=value
    ({"aic-metrics": "PipeUtilization", "x": "on"}, [], False, ["--aic-metrics=PipeUtilization", "--x=on"]),
    ({}, [], True, []),
])
def test_render(options, flags, short, want):
    assert render(options, flags, short) == want


def spec(backend, **kw):
    return WorkerSpec(backend=backend, group="actor", rank=1, output_dir="/data/run/system", run_id="r1", **kw)


@pytest.mark.parametrize("s,want", [
    (spec("nsight", options={"t": "cuda,nvtx", "sample": "process-tree"}, flags=("python-backtrace",)),
     ["/opt/nsys", "profile", "--python-backtrace", "-t", "cuda,nvtx", "--sample=process-tree",
      "--output=/data/run/system/actor_rank1", *PY]),
    # steps: cudaProfilerApi with repeat:N (not RLinf's stop, not nsys's stop-shutdown), injected after the user's
    (spec("nsight", options={"t": "cuda"}, steps=(2, 4)),
     ["/opt/nsys", "profile", "-t", "cuda", "--capture-range=cudaProfilerApi", "--capture-range-end=repeat:2",
      "--output=/data/run/system/actor_rank1", *PY]),
    # a user's own (valid) range end is kept
    (spec("nsight", options={"capture-range-end": "repeat-shutdown:3"}, steps=(3, 5, 7)),
     ["/opt/nsys", "profile", "--capture-range-end=repeat-shutdown:3", "--capture-range=cudaProfilerApi",
      "--output=/data/run/system/actor_rank1", *PY]),
    (spec("rocprof_sys", args={"T": "hip,hsa,rccl", "output-format": "json"}),
     ["/opt/rocprof-sys-python", "-T", "hip,hsa,rccl", "--output-format=json", "--", *PY]),
    (spec("msprof", options={"aic-metrics": "PipeUtilization", "task-time": "on"}),
     ["/opt/msprof", "--output=/data/run/system/actor_rank1.msprof", "--aic-metrics=PipeUtilization", "--task-time=on", *PY]),
    (spec("py_spy", args={"r": "50"}, flags=("native",)),
     ["/opt/py-spy", "record", "--format", "chrometrace", "-o", "/data/run/system/actor_rank1.py-spy.json",
      "--idle", "--native", "-r", "50", "--", *PY]),
    # --idle is added once (without it py-spy's frames stretch over idle gaps)
    (spec("py_spy", flags=("idle",), steps=(2,)),
     ["/opt/py-spy", "record", "--format", "chrometrace", "-o", "/data/run/system/actor_rank1.py-spy.json",
      "--idle", "--", *PY]),
], ids=lambda v: v.backend if isinstance(v, WorkerSpec) else "")
def test_command_lines(s, want):
    b = system_backend(s.backend)
    assert b.command(f"/opt/{b.tool}", s, PY) == want


def test_rocprof_output_environment_is_derived_from_the_output_dir():
    s = spec("rocprof_sys")
    assert system_backend("rocprof_sys").env(s) == {"ROCPROFSYS_OUTPUT_PATH": "/data/run/system/actor_rank1.rocprof-sys",
                                                    "ROCPROFSYS_OUTPUT_PREFIX": "actor_rank1_"}
    assert all(system_backend(n).env(s) == {} for n in system_backend_names() if n != "rocprof_sys")


def test_registry_holds_the_four_tools():
    assert system_backend_names() == ("nsight", "rocprof_sys", "msprof", "py_spy")
    assert [system_backend(n).tool for n in system_backend_names()] == ["nsys", "rocprof-sys-python", "msprof", "py-spy"]
    with pytest.raises(ValueError, match="allowed: nsight, rocprof_sys, msprof, py_spy"):
        system_backend("perf")


def test_spec_token_is_shell_safe_and_round_trips(tmp_path):
    cfg = load_config({"integrated": {"profile_save_path": str(tmp_path / "p q")},  # a space in the path
                       "system": {"backend": "nsight", "worker_groups": ["actor"], "steps": [4, 2],
                                  "options": {"t": "cuda,nvtx"}, "flags": ["python-backtrace"]}})
    s = WorkerSpec.from_config(cfg, "actor", 3, env={"A": "b c"})
    token = s.encode()
    assert shlex.quote(token) == token  # nothing for bash -c to split or expand
    back = WorkerSpec.decode(token)
    assert back == s and back.steps == (2, 4) and back.output_dir == str(tmp_path / "p q" / "system")
    assert back.report_path.name == "actor_rank3.nsys-rep" and back.meta_path.name == "actor_rank3.system.json"
