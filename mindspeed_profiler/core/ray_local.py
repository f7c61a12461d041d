"""Settings for a local Ray cluster that this package (or its examples and tests) starts itself.

Ray's own metrics export is turned off there: nothing of ours reads it (the dashboard is off), and
Ray 2.60's OpenTelemetry metric reader thread segfaulted a driver once in CI (SIGSEGV in
`TemporalMetricStorage::buildMetrics`, a race of the kind ray-project/ray#60048 fixed for gauges).
Set in the driver's environment before `ray.init`, so that the raylet, GCS and workers it starts
inherit them. A value the user already set wins. Standard library only: the analysis imports it.
"""
from __future__ import annotations

import os

# RAY_enable_metrics_collection=0: stats::Init returns early ("Disabled stats." in the driver's log)
# and the metrics agent collects nothing; RAY_enable_open_telemetry=0: no OTel exporter thread.
LOCAL_CLUSTER_ENV: dict[str, str] = {"RAY_enable_metrics_collection": "0", "RAY_enable_open_telemetry": "0"}


def prepare_local_cluster_env(environ: "os._Environ[str] | dict[str, str] | None" = None) -> dict[str, str]:
    """Put LOCAL_CLUSTER_ENV into `environ` (default os.environ) where unset; returns what it set."""
    env = os.environ if environ is None else environ
    added = {k: v for k, v in LOCAL_CLUSTER_ENV.items() if k not in env}
    env.update(added)
    return added
