"""The marker kind `nvtx`: torch.cuda.nvtx, which nsys sees."""
from __future__ import annotations

from typing import Any

from mindspeed_profiler.backends.marker_kinds import DEFAULT_DOMAIN, MarkerKind, register_marker_kind


class NvtxMarkers:
    """torch.cuda.nvtx range_start(msg) -> id / range_end(id) / mark(msg) (NVTX domains are not
    exposed by torch: the name carries it). Not range_push/range_pop: those close the innermost
    range of the thread, so async functions interleaving on one event loop would end each other's
    ranges; range_start ids close exactly the range they opened, on any thread."""

    def __init__(self, nvtx: Any):
        self.nvtx = nvtx

    def start(self, name: str, domain: str, stream: Any) -> Any:
        return self.nvtx.range_start(name if domain == DEFAULT_DOMAIN else f"{domain}:{name}")

    def end(self, token: Any, domain: str) -> None:
        self.nvtx.range_end(token)

    def mark(self, message: str, domain: str, stream: Any) -> None:
        self.nvtx.mark(message if domain == DEFAULT_DOMAIN else f"{domain}:{message}")


def load() -> NvtxMarkers:
    import torch

    if not torch.cuda.is_available():  # CPU builds raise on every nvtx call
        raise RuntimeError("torch.cuda is not available (CPU build or no GPU)")
    return NvtxMarkers(torch.cuda.nvtx)


register_marker_kind(MarkerKind("nvtx", load))
