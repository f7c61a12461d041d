"""Shared test fixtures. The real sample traces live in ../shared/data (read-only), beside the repo
(MSP_SHARED_DATA overrides): use SHARED_DATA or the `shared_data` fixture, never a fixed path.
Plain helper modules beside this file: profiler_testutil.py (profiler tests), analysis_testutil.py
(analysis tests), fake_torch_npu.py (the `fake_torch_npu` fixture below installs it)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("MSP_SHARED_DATA", REPO_ROOT.parent / "shared" / "data"))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """Path to the real sample traces (../shared/data); tests needing them skip if it is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"sample data not found at {SHARED_DATA} (set MSP_SHARED_DATA)")
    return SHARED_DATA


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


# ------------------------------------------------------------------------------ fakes and clusters


@pytest.fixture
def fake_torch_npu():
    """The default fake torch_npu (tests/fake_torch_npu.py, built from the real signature snapshot),
    installed in sys.modules for the test and removed afterwards. Tests that need a MODIFIED snapshot
    build and install their own FakeTorchNpu(snapshot)."""
    from fake_torch_npu import FakeTorchNpu

    fake = FakeTorchNpu().install()
    try:
        yield fake
    finally:
        fake.uninstall()


@pytest.fixture(scope="module")
def ray_cluster():
    """A local Ray cluster for the tests of one module: 2 CPUs (the test actors ask for fractions of
    one), no dashboard, worker logs not forwarded. Ray is imported here, not when conftest is collected."""
    ray = pytest.importorskip("ray")
    from mindspeed_profiler.core.ray_local import init_local_ray, prepare_local_cluster_env

    prepare_local_cluster_env()
    try:   # a busy 2-core box can miss Ray's fixed 30 s raylet wait: started again then (init_local_ray)
        init_local_ray(ray, dict(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False,
                                 ignore_reinit_error=True))
        yield
    finally:
        ray.shutdown()


# ------------------------------------------------------------------------------ runtime state (markers, tracer)

_STATE_FIELDS = ("mstx_enabled", "device", "markers", "capture_markers", "capture_active", "mstx_domain_include",
                 "mstx_domain_exclude", "stage", "iteration")


@pytest.fixture
def clean_state():
    """Save the process's marker / tracer STATE, give the test a clean one (no tracer, markers off),
    restore it afterwards."""
    from mindspeed_profiler.runtime import mstx
    from mindspeed_profiler.core.state import STATE
    from mindspeed_profiler.core.warn import reset_warnings
    from mindspeed_profiler.tracing import shutdown_tracer
    from mindspeed_profiler.tracing.marker_metrics import METRICS

    saved = {f: getattr(STATE, f) for f in _STATE_FIELDS}
    shutdown_tracer()
    STATE.mstx_enabled, STATE.device, STATE.markers, STATE.capture_markers = False, None, None, ()
    STATE.capture_active = False
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


@pytest.fixture
def runtime_warnings(caplog):
    """The messages the runtime reported (mindspeed_profiler logger, WARNING and above) during the test."""
    import logging

    caplog.set_level(logging.WARNING, logger="mindspeed_profiler")

    def messages(match: str = "") -> list[str]:
        return [r.getMessage() for r in caplog.records
                if r.name.startswith("mindspeed_profiler") and r.levelno >= logging.WARNING and match in r.getMessage()]

    return messages


def tracer_cfg(save_path, **tracer) -> dict:
    """A profiler_config dict with the tracer on, writing under `save_path`."""
    return {"integrated": {"profile_save_path": str(save_path)}, "tracer": {"enable": True, **tracer}}


@pytest.fixture(scope="session")
def ascend_sets(tmp_path_factory):
    """Real Ascend capture sets by name (tests/ascend_data.py: SETS), unpacked once, read-only;
    a set from ../shared that is absent skips the test, saying where it was looked for."""
    import ascend_data

    ascend_data.use_root(tmp_path_factory.mktemp("ascend_sets"))

    def get(name: str) -> Path:
        if not ascend_data.available(name):
            pytest.skip(f"{name}: {ascend_data.SETS[name].source} not found (../shared/ascend-2rank; MSP_SHARED_ASCEND)")
        return ascend_data.ascend_set(name)
    return get


@pytest.fixture
def listeners():
    """observers.ITERATION_LISTENERS emptied for the test and restored after it."""
    from mindspeed_profiler.capture import observers

    saved = list(observers.ITERATION_LISTENERS)
    observers.ITERATION_LISTENERS.clear()
    yield observers.ITERATION_LISTENERS
    observers.ITERATION_LISTENERS[:] = saved
