"""Shared fixtures for the tracing / mstx tests (no tests here)."""
from __future__ import annotations

import pytest

from mindspeed_profiler._state import STATE

_FIELDS = ("mstx_enabled", "device", "capture_active", "mstx_domain_include", "mstx_domain_exclude", "stage", "iteration")


@pytest.fixture
def clean_state():
    """Save STATE, give the test a clean one (no tracer, markers off), restore it afterwards."""
    from mindspeed_profiler import mstx
    from mindspeed_profiler.tracing import shutdown_tracer
    from mindspeed_profiler.tracing._metrics import METRICS
    from mindspeed_profiler.tracing._warn import reset_warnings

    saved = {f: getattr(STATE, f) for f in _FIELDS}
    shutdown_tracer()
    STATE.mstx_enabled, STATE.device, STATE.capture_active = False, None, False
    STATE.mstx_domain_include, STATE.mstx_domain_exclude = (), ()
    STATE.stage, STATE.iteration = None, None
    METRICS.on = False
    METRICS.data.clear()
    mstx.reset_marker_backends()
    reset_warnings()
    yield STATE
    shutdown_tracer()
    METRICS.on = False
    METRICS.data.clear()
    mstx.reset_marker_backends()
    for f, v in saved.items():
        setattr(STATE, f, v)


def tracer_cfg(save_path, **tracer) -> dict:
    """A profiler_config dict with the tracer on, writing under `save_path`."""
    return {"integrated": {"profile_save_path": str(save_path)}, "tracer": {"enable": True, **tracer}}
