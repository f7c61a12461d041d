"""Capture backends behind one small interface (base.py), chosen by `integrated.backend`.

auto: npu if torch_npu imports and an NPU is present, else torch (CUDA activities when CUDA is
available, else CPU).
"""
from __future__ import annotations

from mindspeed_profiler.backends.base import Backend, CaptureHandle, CaptureSpec

__all__ = ["Backend", "CaptureHandle", "CaptureSpec", "select_backend"]


def select_backend(name: str = "auto") -> Backend:
    """The backend for `integrated.backend`; raises if `npu` is asked for and torch_npu is unusable."""
    from mindspeed_profiler.backends.npu import NpuBackend, import_torch_npu, npu_available
    from mindspeed_profiler.backends.torch import TorchBackend

    if name == "npu":
        tnpu = import_torch_npu()  # raises with torch_npu's own message
        if not tnpu.npu.is_available():
            raise RuntimeError("backend: npu was asked for, torch_npu imports, but no NPU is available")
        return NpuBackend()
    if name == "torch":
        return TorchBackend()
    if name != "auto":
        raise ValueError(f"backend {name!r}: allowed: auto, npu, torch")
    return NpuBackend() if npu_available() else TorchBackend()
