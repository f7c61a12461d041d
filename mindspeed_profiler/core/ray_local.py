"""Settings for a local Ray cluster that this package (or its examples and tests) starts itself.

Ray's own metrics export is turned off there: nothing of ours reads it (the dashboard is off), and
Ray 2.60's OpenTelemetry metric reader thread segfaulted a driver once in CI (SIGSEGV in
`TemporalMetricStorage::buildMetrics`, a race of the kind ray-project/ray#60048 fixed for gauges).
Set in the driver's environment before `ray.init`, so that the raylet, GCS and workers it starts
inherit them. A value the user already set wins. Standard library only: the analysis imports it.
"""
from __future__ import annotations

import os
from typing import Any, Callable

# RAY_enable_metrics_collection=0: stats::Init returns early ("Disabled stats." in the driver's log)
# and the metrics agent collects nothing; RAY_enable_open_telemetry=0: no OTel exporter thread.
LOCAL_CLUSTER_ENV: dict[str, str] = {"RAY_enable_metrics_collection": "0", "RAY_enable_open_telemetry": "0"}


def prepare_local_cluster_env(environ: "os._Environ[str] | dict[str, str] | None" = None) -> dict[str, str]:
    """Put LOCAL_CLUSTER_ENV into `environ` (default os.environ) where unset; returns what it set."""
    env = os.environ if environ is None else environ
    added = {k: v for k, v in LOCAL_CLUSTER_ENV.items() if k not in env}
    env.update(added)
    return added


RAY_START_ATTEMPTS = 3
_STARTUP_TIMEOUT = "timed out during startup"   # Ray's message (ray/_private/node.py) when the raylet missed its wait


def init_local_ray(ray: Any, kwargs: dict[str, Any], local: bool = True,
                   log: Callable[[str], None] = lambda m: print(m, flush=True)) -> None:
    """`ray.init(**kwargs)`, again (up to RAY_START_ATTEMPTS in all) when a local node of our own timed
    out at startup: Ray waits a fixed 30 s for its raylet to register, which a busy machine (other jobs
    on its 2 cores) can miss. Any other failure, and any failure joining a cluster that runs elsewhere
    (`local=False`), is raised at once. `ray` is the module, passed in: this module imports no Ray."""
    for attempt in range(1, RAY_START_ATTEMPTS + 1):
        try:
            ray.init(**kwargs)
            return
        except Exception as err:
            if not local or _STARTUP_TIMEOUT not in str(err) or attempt == RAY_START_ATTEMPTS:
                raise
            log(f"Ray's local node timed out at startup (attempt {attempt} of {RAY_START_ATTEMPTS}, a busy "
                "machine?): starting it again")
            ray.shutdown()
