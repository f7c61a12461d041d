"""mindspeed-profiler: profiling for RL post-training (GRPO, DPO, PPO) on Ascend NPU, CUDA and CPU.

Public names are imported lazily so that `import mindspeed_profiler` stays cheap and never
imports torch_npu (analysis needs no device and no torch_npu).
"""
from __future__ import annotations

import importlib
from typing import Any

from mindspeed_profiler import compat

compat.install()   # old import paths (mindspeed_profiler.profiler, .mstx, ...) answered by the moved modules

__version__ = "0.1.0"

# public name -> module that defines it
_EXPORTS: dict[str, str] = {
    "load_config": "mindspeed_profiler.config",
    "ProfilerConfig": "mindspeed_profiler.config",
    "IntegratedConfig": "mindspeed_profiler.config",
    "TracerConfig": "mindspeed_profiler.config",
    "SystemConfig": "mindspeed_profiler.config",
    "MetricsConfig": "mindspeed_profiler.config",
    "ProfilerConfigError": "mindspeed_profiler.config",
    "register_stage": "mindspeed_profiler.capture.stages",
    "IntegratedProfiler": "mindspeed_profiler.runtime.profiler",
    "get_profiler": "mindspeed_profiler.integrations.mindspeed_api",
    "profiler_start": "mindspeed_profiler.integrations.mindspeed_api",
    "profiler_step": "mindspeed_profiler.integrations.mindspeed_api",
    "write_run_manifest": "mindspeed_profiler.runtime.manifest",
    "start_run": "mindspeed_profiler.runtime.manifest",
    "register_backend": "mindspeed_profiler.backends.registry",
    "RunAnalysis": "mindspeed_profiler.analysis.results.facade",
    "mstx_timer_decorator": "mindspeed_profiler.runtime.mstx",
    "mstx_range": "mindspeed_profiler.runtime.mstx",
    "mstx_mark": "mindspeed_profiler.runtime.mstx",
    "enable_markers": "mindspeed_profiler.runtime.mstx",
    "enable_marker_metrics": "mindspeed_profiler.runtime.mstx",
    "marker_metrics": "mindspeed_profiler.runtime.mstx",
    "pop_marker_metrics": "mindspeed_profiler.runtime.mstx",
    "record_samples": "mindspeed_profiler.rollout.api",
    "offload": "mindspeed_profiler.metrics.offload",
    "onload": "mindspeed_profiler.metrics.offload",
    "attach_engine": "mindspeed_profiler.engines.attach",
    "engine_profiler_args": "mindspeed_profiler.engines.attach",
}

__all__ = sorted(_EXPORTS) + ["__version__"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'mindspeed_profiler' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # cache: later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
