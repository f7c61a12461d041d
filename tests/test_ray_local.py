"""A local Ray cluster of our own runs without Ray's metrics export (core/ray_local.py says why)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from mindspeed_profiler.core.ray_local import LOCAL_CLUSTER_ENV, prepare_local_cluster_env


def test_sets_only_what_the_user_left_unset():
    env = {"RAY_enable_open_telemetry": "1", "PATH": "/bin"}
    added = prepare_local_cluster_env(env)
    assert added == {"RAY_enable_metrics_collection": "0"}
    assert env["RAY_enable_open_telemetry"] == "1" and env["RAY_enable_metrics_collection"] == "0"
    assert prepare_local_cluster_env(env) == {}   # twice: nothing more


@pytest.mark.slow
def test_the_cluster_and_its_workers_took_the_setting(ray_cluster):
    """The conftest's cluster is started the way the examples start theirs: Ray logs "Disabled stats."
    in the driver and in a worker, so the flag names still mean what they meant in Ray 2.60."""
    import ray

    assert all(os.environ.get(k) == v for k, v in LOCAL_CLUSTER_ENV.items())

    @ray.remote(num_cpus=0.1)
    def worker_pid() -> int:
        return os.getpid()

    pid = ray.get(worker_pid.remote(), timeout=120)
    logs = Path(ray._private.worker.global_worker.node.get_logs_dir_path())
    for who, p in (("driver", os.getpid()), ("worker", pid)):
        found = list(logs.glob(f"python-core-{who}-*_{p}.log"))
        assert found, f"no core {who} log for pid {p} in {logs}"
        assert "Disabled stats." in found[0].read_text(errors="replace"), f"the {who} still collects Ray's metrics"
