"""With the tracer on, prof.stage() and prof.step() emit `stage` and `iteration` spans (docs/formats.md)."""
from __future__ import annotations

import pytest

from mindspeed_profiler import IntegratedProfiler, load_config, tracing
from mindspeed_profiler.core.state import STATE
from mindspeed_profiler.analysis.timeline import merge
from profiler_testutil import capture_dirs, train


@pytest.mark.parametrize("profile", [False, True])
def test_stage_and_iteration_spans(tmp_path, profile):
    cfg = load_config({
        "integrated": {"profile": profile, "profile_save_path": str(tmp_path), "backend": "torch", "profile_steps": [2]},
        "tracer": {"enable": True, "output_dir": str(tmp_path / "timeline")},
    })
    tracing.init_tracer(cfg, role="actor", rank=0)
    try:
        assert STATE.tracer is not None
        train(IntegratedProfiler(cfg, role="actor", rank=0, world_size=1), 3)
    finally:
        tracing.shutdown_tracer()
    events = [e for e in merge.build_timeline(str(tmp_path / "timeline"))["traceEvents"] if e.get("ph") == "X"]
    iters = sorted(e["args"]["iteration"] for e in events if e.get("cat") == "iteration")
    assert iters == [1, 2, 3]
    stages = [(e["name"], e["args"].get("iteration")) for e in events if e.get("cat") == "stage"]
    assert sorted(stages) == sorted((s, i) for i in (1, 2, 3) for s in ("actor_generate", "actor_update"))
    # iteration spans tile the run: each ends before the next begins
    spans = sorted((e["ts"], e["ts"] + e["dur"]) for e in events if e.get("cat") == "iteration")
    assert all(a[1] <= b[0] + 1 for a, b in zip(spans, spans[1:]))
    assert len(capture_dirs(tmp_path)) == (1 if profile else 0)


def test_stage_span_excludes_capture_export(tmp_path):
    """A named-stage capture is exported when the stage call ends; the stage's timeline span must not
    include that export (it would make the profiled call look slow), which gets its own span."""
    cfg = load_config({
        "integrated": {"profile": True, "profile_save_path": str(tmp_path), "backend": "torch",
                       "stage": "actor_update", "profile_step_start": 2, "profile_step_end": 3},
        "tracer": {"enable": True, "output_dir": str(tmp_path / "timeline")},
    })
    tracing.init_tracer(cfg, role="actor", rank=0)
    try:
        train(IntegratedProfiler(cfg, role="actor", rank=0, world_size=1), 3)
    finally:
        tracing.shutdown_tracer()
    events = [e for e in merge.build_timeline(str(tmp_path / "timeline"))["traceEvents"] if e.get("ph") == "X"]
    (upd,) = [e for e in events if e.get("cat") == "stage" and e["name"] == "actor_update" and e["args"]["iteration"] == 2]
    (export,) = [e for e in events if e.get("cat") == "profiler" and e["name"] == "profiler_export"]
    assert export["args"]["stage"] == "actor_update"
    assert export["ts"] >= upd["ts"] + upd["dur"] - 1  # after the stage span (1 us rounding)
    assert len(capture_dirs(tmp_path)) == 1
