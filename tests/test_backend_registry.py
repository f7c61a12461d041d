"""The capture backend registry: `auto` asks it, the config's allowed values come from it, and a
backend added from outside is one class plus one registration (shown end to end: capture ->
metadata -> analysis)."""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from mindspeed_profiler import IntegratedProfiler, ProfilerConfigError, load_config
from mindspeed_profiler.analysis.pipeline.batch import analyse_directory
from mindspeed_profiler.backends import Backend, CaptureHandle, CaptureSpec, layout, registry
from mindspeed_profiler.backends import backend_names, register_backend, select_backend
from mindspeed_profiler.config import backend_choices
from profiler_testutil import capture_dirs, meta_of, train


def test_builtin_backends_and_auto():
    assert backend_names() == ("npu", "torch", "markers")      # auto's order: npu first, markers never
    assert "torch_npu" not in sys.modules
    assert select_backend("auto").name == "torch"   # no torch_npu here
    with pytest.raises(RuntimeError, match="torch_npu does not import"):
        select_backend("npu")
    with pytest.raises(ValueError, match="allowed: auto, npu, torch, markers"):
        select_backend("nsys")


def test_registration_checks_the_class():
    class NoSuffix(Backend):
        name = "x"

        def open(self, spec):
            raise NotImplementedError
    with pytest.raises(TypeError, match="suffix"):
        register_backend(NoSuffix)
    NoSuffix.suffix = "xyz_pt"
    with pytest.raises(ValueError, match="not a capture format"):
        register_backend(NoSuffix)


class WallClockCapture(CaptureHandle):
    """Records each iteration's wall time as a ProfilerStep#N span in a Chrome trace."""

    def __init__(self, spec: CaptureSpec):
        self.spec, self.directory, self.spans, self._it, self._t0 = spec, None, [], spec.begin, None

    def start(self) -> None:
        self.directory = layout.make_capture_dir(self.spec.save_dir, self.spec.worker_name, WallClock.suffix)
        self._t0 = time.perf_counter_ns()

    def step(self) -> None:
        t = time.perf_counter_ns()
        if self._it >= self.spec.first:
            self.spans.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{self._it}",
                               "ts": self._t0 / 1e3, "dur": (t - self._t0) / 1e3, "pid": 1, "tid": 1})
        self._it, self._t0 = self._it + 1, t

    def stop(self) -> None:
        pass

    def export(self) -> list[Path]:
        path = self.directory / "steps.json"
        path.write_text(json.dumps({"traceEvents": self.spans}))
        return [path]


class WallClock(Backend):
    name, suffix, device = "wallclock", "pt", "cpu"

    def open(self, spec: CaptureSpec) -> CaptureHandle:
        return WallClockCapture(spec)


@pytest.fixture
def wallclock():
    with registry.REGISTRY.scoped():   # what the test registers is gone after it
        yield WallClock


def test_a_new_backend_is_one_class_and_one_registration(tmp_path, wallclock):
    assert register_backend(wallclock) is wallclock
    assert "wallclock" in backend_choices()
    cfg = load_config({"integrated": {"profile": True, "backend": "wallclock", "profile_save_path": str(tmp_path),
                                      "profile_step_start": 2, "profile_step_end": 4}})
    train(IntegratedProfiler(cfg, role="actor", rank=0, world_size=1), 5)
    (d,) = capture_dirs(tmp_path)
    meta = meta_of(d)
    assert (meta["backend"], meta["device"], meta["status"], meta["trace_files"]) == ("wallclock", "cpu", "ok", ["steps.json"])
    summary, code = analyse_directory(tmp_path, jobs=1, progress=False, write=False)
    (cap,) = summary["captures"]
    assert code == 0 and cap["kind"] == "torch" and [s["step"] for s in cap["steps"]] == [2, 3]


def test_an_unregistered_backend_is_a_config_error():
    with pytest.raises(ProfilerConfigError, match="wallclock.*allowed: auto, npu, torch, markers"):
        load_config({"integrated": {"backend": "wallclock"}})
