"""Never fatal: a backend that raises at start / step / stop / export costs one capture, not the run."""
from __future__ import annotations

import logging

import pytest
import torch

from mindspeed_profiler import IntegratedProfiler, load_config
from mindspeed_profiler.core.state import STATE
from mindspeed_profiler.backends.torch import TorchBackend
from profiler_testutil import capture_dirs, load_trace, meta_of, profile_config, profiler_steps, train


class InjectedFault(RuntimeError):
    pass


class FaultyBackend(TorchBackend):
    """The real torch backend, whose captures raise in one phase (for the first `times` captures)."""

    def __init__(self, phase: str, times: int = 1):
        super().__init__(cuda=False)
        self.phase, self.times = phase, times

    def open(self, spec):
        cap = super().open(spec)
        if self.times > 0:
            self.times -= 1
            real = getattr(cap, self.phase)

            def boom(*a, **k):
                if self.phase == "stop":
                    real()  # leave Kineto clean, then fail as a broken exporter would
                raise InjectedFault(f"injected {self.phase} failure")

            setattr(cap, self.phase, boom)
        return cap


@pytest.fixture(scope="module")
def baseline_losses():
    off = load_config({"integrated": {"profile": False}})
    return train(IntegratedProfiler(off, role="a"), 6)


@pytest.mark.parametrize("phase", ["start", "step", "stop", "export"])
def test_fault_in_any_phase_is_recorded_and_training_goes_on(tmp_path, caplog, baseline_losses, phase):
    caplog.set_level(logging.WARNING, logger="mindspeed_profiler")
    prof = IntegratedProfiler(profile_config(tmp_path, profile_steps=[2, 3, 5]), role="a", rank=0, world_size=1,
                              backend=FaultyBackend(phase))
    losses = train(prof, 6)
    assert losses == baseline_losses  # same numbers as without profiling
    first, second = [meta_of(d) for d in capture_dirs(tmp_path)]
    assert first["steps"] == [2, 3] and first["status"] == "failed"
    assert [e["phase"] for e in first["errors"]] == [phase]
    assert "InjectedFault: injected" in first["errors"][0]["error"]
    # the next capture is unaffected
    assert second["status"] == "ok" and second["steps"] == [5, 5]
    assert profiler_steps(load_trace(capture_dirs(tmp_path)[1])) == [5]
    warnings = [r for r in caplog.records if "capture abandoned" in r.getMessage()]
    assert len(warnings) == 1 and phase in warnings[0].getMessage()
    assert STATE.capture_active is False


def test_repeated_failures_are_logged_once(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="mindspeed_profiler")
    prof = IntegratedProfiler(profile_config(tmp_path, profile_steps=[1, 3, 5]), role="a", rank=0, world_size=1,
                              backend=FaultyBackend("step", times=3))
    train(prof, 6, stages=("actor_update",))
    assert [m["status"] for m in prof.captures] == ["failed"] * 3
    assert len([r for r in caplog.records if "capture abandoned" in r.getMessage()]) == 1


def test_real_torch_profiler_failure(tmp_path, monkeypatch, baseline_losses):
    def broken(self):
        raise RuntimeError("Kineto could not start")

    monkeypatch.setattr(torch.profiler.profile, "start_trace", broken)
    prof = IntegratedProfiler(profile_config(tmp_path, profile_step_start=2, profile_step_end=4), role="a", rank=0, world_size=1)
    assert train(prof, 6) == baseline_losses
    (d,) = capture_dirs(tmp_path)
    meta = meta_of(d)
    assert meta["status"] == "failed" and meta["errors"][0]["phase"] == "start"
    assert "Kineto could not start" in meta["errors"][0]["error"]


def test_unusable_backend_is_reported_per_capture(tmp_path, caplog, baseline_losses):
    # backend: npu on a machine without torch_npu: every capture fails at start, training runs
    prof = IntegratedProfiler(profile_config(tmp_path, backend="npu", profile_steps=[2, 4]), role="a", rank=0, world_size=1)
    assert train(prof, 6) == baseline_losses
    metas = [meta_of(d) for d in capture_dirs(tmp_path)]
    assert [m["status"] for m in metas] == ["failed", "failed"]
    assert all(m["errors"][0]["phase"] == "start" and m["backend"] == "npu" for m in metas)
    assert all(d.name.endswith("_ascend_pt") for d in capture_dirs(tmp_path))
    assert len([r for r in caplog.records if "unusable" in r.getMessage()]) == 1


def test_failing_capture_does_not_leak_a_running_profiler(tmp_path):
    prof = IntegratedProfiler(profile_config(tmp_path, profile_steps=[1, 2]), role="a", rank=0, world_size=1, backend=FaultyBackend("step"))
    train(prof, 3, stages=())
    # a later, independent profile works: Kineto was left stopped
    with torch.profiler.profile() as p:
        torch.ones(2).sum()
    assert any(e.name == "aten::sum" for e in p.events())
