"""Per-sample records of the generation stages (docs/rollout.md): `record_samples` for code without
a profiler object; `IntegratedProfiler.record_samples` is the same on a profiler."""
from __future__ import annotations

from mindspeed_profiler.rollout.api import record_samples, running_profiler

__all__ = ["record_samples", "running_profiler"]
