"""Capture backends behind one small interface (base.py), chosen by `integrated.backend` through
the registry (registry.py).

auto: the usable backend with the highest priority: npu if torch_npu imports and an NPU is
present, else torch (CUDA activities when CUDA is available, else CPU).
"""
from __future__ import annotations

from mindspeed_profiler.backends.base import Backend, CaptureHandle, CaptureSpec, WindowedCapture
from mindspeed_profiler.backends.registry import (
    backend_class,
    backend_classes,
    backend_names,
    register_backend,
    select_backend,
)

__all__ = ["Backend", "CaptureHandle", "CaptureSpec", "WindowedCapture", "backend_class", "backend_classes",
           "backend_names", "register_backend", "select_backend"]
