"""Per-iteration RL metrics (`profiler_config.metrics`): stage and iteration timings, tokens/s and
MFU, one JSON line per iteration per worker (docs/metrics.md).

    model_size.py   pure: ModelSize, from_megatron (Megatron's parameter formula), from_module (numel)
    peaks.py        pure: dense BF16 / FP16 peak TFLOPS by device name
    tracker.py      the observer the profiler adds when `metrics.enable` is true

The tracker is imported by the profiler only when the section is enabled.
"""
from __future__ import annotations

from mindspeed_profiler.metrics.model_size import ModelSize, from_megatron, from_module
from mindspeed_profiler.metrics.peaks import PEAKS, peak_tflops

__all__ = ["ModelSize", "PEAKS", "from_megatron", "from_module", "peak_tflops"]
