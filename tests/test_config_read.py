"""Config that means what it says: every field of every section is read by the runtime.

The runtime scenarios below (a torch capture, a torch_npu capture against the fake built from the
real signatures, the tracer from init to the merged timeline, the launch settings and launch plan of
process-level capture for each system backend) run while every read of a config
field is recorded, counting only reads made by the library outside config.py (validation,
`to_dict` and dataclass internals do not count; a derived accessor such as `steps` counts as a read
of the fields it uses when the runtime calls it). A field nothing reads is an error: a user setting
it would get nothing. A field planted without a reader is caught.
"""
from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Callable

import mindspeed_profiler
from mindspeed_profiler import config as C
from mindspeed_profiler.config.checks import check_bool
from mindspeed_profiler import IntegratedProfiler, load_config
from profiler_testutil import train

PACKAGE = Path(mindspeed_profiler.__file__).parent
CONFIG_DIR = str(PACKAGE / "config") + "/"   # the config package reads its own fields while checking
SECTIONS = {"integrated": C.IntegratedConfig, "tracer": C.TracerConfig, "system": C.SystemConfig}
# Fields the runtime does not read yet, each with the reason a user cannot be misled by it (none now).
NOT_READ_YET: dict[tuple[str, str], str] = {}
# the config objects' accessors that stand for the fields they read (the runtime calls them)
DERIVED = {"stages", "steps", "step_runs", "step_recorded", "rank_selected", "stage_selected", "timeline_dir", "system_output_dir"}


def _in_runtime(filename: str) -> bool:
    return filename.startswith(str(PACKAGE)) and not filename.startswith(CONFIG_DIR)


class ReadRecorder:
    """Records (section, field) for every read of a config field by the library's runtime."""

    def __init__(self, classes: dict[str, type]):
        self.classes = classes
        self.reads: set[tuple[str, str]] = set()

    def __enter__(self) -> "ReadRecorder":
        self._saved = {}
        for section, cls in self.classes.items():
            names = {f.name for f in dataclasses.fields(cls)}
            self._saved[cls] = cls.__dict__.get("__getattribute__")
            cls.__getattribute__ = self._make(section, names)
        return self

    def _make(self, section: str, names: set[str]) -> Callable:
        reads = self.reads

        def getattribute(obj, name):
            if name in names:
                f1 = sys._getframe(1)
                if _in_runtime(f1.f_code.co_filename):
                    reads.add((section, name))
                elif f1.f_code.co_filename.startswith(CONFIG_DIR) and f1.f_code.co_name in DERIVED:
                    caller = f1.f_back
                    while caller is not None and caller.f_code.co_name == "getattribute":  # a property runs inside this hook
                        caller = caller.f_back
                    if caller is not None and _in_runtime(caller.f_code.co_filename):
                        reads.add((section, name))
            return object.__getattribute__(obj, name)
        return getattribute

    def __exit__(self, *exc) -> None:
        for cls, saved in self._saved.items():
            if saved is None:
                del cls.__getattribute__
            else:
                cls.__getattribute__ = saved


def run_scenarios(tmp_path: Path, integrated: Callable = lambda c: c) -> None:
    """The runtime, end to end, on small real work. `integrated` may swap the integrated section."""
    from fake_torch_npu import FakeTorchNpu
    from mindspeed_profiler.tracing import init_tracer, merge_timeline, shutdown_tracer

    # a torch capture with every option that has a runtime meaning on this backend
    torch_cfg = load_config({
        "integrated": {"profile": True, "mstx": True, "profile_save_path": str(tmp_path / "t"), "backend": "torch",
                       "profile_step_start": 2, "profile_step_end": 3, "warmup_steps": 1, "trace_size_budget_mb": 100,
                       "profile_parallel_ranks": {"tp": [0]}, "mstx_domain_exclude": ["noisy"],
                       "role_ranks": {"actor": [0], "ref": "all"}, "profile_steps_continuous": False,
                       "register_stages": ["rollout_reward"]},
        "tracer": {"enable": True, "gzip": True}})
    init_tracer(torch_cfg, role="driver", rank=0)
    try:
        train(IntegratedProfiler(integrated(torch_cfg.integrated), role="actor", rank=0, world_size=1), 3)
        train(IntegratedProfiler(integrated(dataclasses.replace(torch_cfg.integrated, stage="actor_update",
                                                                profile_steps=(1,))), role="ref", rank=0, world_size=1), 2)
    finally:
        shutdown_tracer()
    assert str(merge_timeline(torch_cfg)).endswith(".json.gz")
    # a torch_npu capture (the fake follows torch-npu's real signatures)
    npu_cfg = load_config({"integrated": {"profile": True, "profile_save_path": str(tmp_path / "n"), "backend": "npu",
                                          "aic_metrics": "PipeUtilization", "l2_cache": True, "profile_analysis": True,
                                          "mstx_domain_include": ["train"]}})
    fake = FakeTorchNpu().install()
    try:
        train(IntegratedProfiler(integrated(npu_cfg.integrated), role="actor", rank=0, world_size=1), 2)
    finally:
        fake.uninstall()
    system_scenarios(tmp_path)


def system_scenarios(tmp_path: Path) -> None:
    """Process-level capture, driver to launcher: the launch settings of a wrapped worker (every
    `system` field) for a backend of each settings shape, then the launcher's plan from them."""
    from mindspeed_profiler.system.launch import plan_launch
    from mindspeed_profiler.runtime.system_settings import worker_runtime_env
    from mindspeed_profiler.system.spec import WorkerSpec

    for system in ({"backend": "nsight", "options": {"t": "cuda"}, "flags": ["python-backtrace"], "steps": [2, 4]},
                   {"backend": "py_spy", "args": {"rate": 50}, "flags": ["native"], "steps": [2]},
                   {"backend": "rocprof_sys", "args": {"T": "hip"}, "env": {"ROCPROFSYS_SAMPLING_FREQ": 10}}):
        cfg = load_config({"integrated": {"profile_save_path": str(tmp_path / "s")},
                           "system": {"enabled": True, "worker_groups": ["actor"], "output_dir": str(tmp_path / "sys"),
                                      **system}})
        env = worker_runtime_env(cfg, "actor", 0)
        token = env["py_executable"].split()[3]
        command = plan_launch(WorkerSpec.decode(token), ["python", "worker.py"], which=lambda tool: "/bin/" + tool).argv
        assert command[-1] == "worker.py" and "python" in command[-4:]   # the worker's command last (through regroup or not)


def unread(reads: set[tuple[str, str]], classes: dict[str, type]) -> list[str]:
    return sorted(f"{s}.{f.name}" for s, cls in classes.items() for f in dataclasses.fields(cls)
                  if (s, f.name) not in reads and (s, f.name) not in NOT_READ_YET)


def test_every_config_field_is_read_by_the_runtime(tmp_path):
    with ReadRecorder(SECTIONS) as rec:
        run_scenarios(tmp_path)
    assert unread(rec.reads, SECTIONS) == []
    # the exemptions are real: nothing reads them
    assert not set(NOT_READ_YET) & rec.reads


def test_a_planted_unused_field_is_caught(tmp_path):
    @dataclasses.dataclass(frozen=True)
    class Planted(C.IntegratedConfig):
        planted_unused: bool = C.setting(False, check_bool)

    sections = dict(SECTIONS, integrated=Planted)
    with ReadRecorder(sections) as rec:
        run_scenarios(tmp_path, integrated=lambda c: Planted(**{f.name: getattr(c, f.name)
                                                                  for f in dataclasses.fields(c)}))
    assert unread(rec.reads, sections) == ["integrated.planted_unused"]


def test_process_level_capture_is_available():
    # the section was refused at load while nothing read it; now every field is read (above)
    assert C.SYSTEM_CAPTURE_AVAILABLE
    assert load_config({"system": {"backend": "py_spy", "worker_groups": ["actor"]}}, check_paths=False).system.enabled
