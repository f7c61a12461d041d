"""The marker kind `mstx`: torch_npu.npu.mstx range_start / range_end / mark (host-side;
device-side when given a stream), with the keywords the installed release takes."""
from __future__ import annotations

from typing import Any, Optional

from mindspeed_profiler.core.warn import warn_once
from mindspeed_profiler.backends.marker_kinds import DEFAULT_DOMAIN, MarkerKind, register_marker_kind


class NpuMarkers:
    """torch_npu.npu.mstx, called with the keywords the installed release takes (read from its
    signatures, else from the snapshot of that release: backends/npu_release.py `installed_api`).
    torch-npu 2.3.1 - 2.5.1 have range_start(message, stream), range_end(range_id), mark(message):
    no domain (and no stream on mark). There the domain is not passed (said once: domains are
    ignored on that version) and the marker is still emitted."""

    def __init__(self, mstx: Any, keywords: Optional[dict] = None, version: Optional[str] = None):
        self.mstx = mstx
        self.version = version or "(unknown version)"
        # function -> accepted keyword names (None or missing: any), decided once
        keywords = keywords or {}
        self._stream = {fn: keywords.get(fn) is None or "stream" in keywords[fn] for fn in ("range_start", "mark")}
        self._domain = {fn: keywords.get(fn) is None or "domain" in keywords[fn] for fn in ("range_start", "range_end", "mark")}

    def _kwargs(self, fn: str, domain: str, stream: Any) -> dict:
        kw = {}
        if stream is not None:
            if self._stream[fn]:
                kw["stream"] = stream
            else:
                warn_once(("mstx-no-stream", fn, self.version), "mindspeed-profiler markers: torch_npu %s: mstx.%s has no "
                          "stream keyword, so its markers are host-side only", self.version, fn)
        if self._domain[fn]:
            kw["domain"] = domain
        elif domain != DEFAULT_DOMAIN:
            warn_once(("mstx-no-domain", self.version), "mindspeed-profiler markers: torch_npu %s: mstx has no domain "
                      "keyword, so mstx domains are ignored on this version (markers of domain %r and any other are "
                      "recorded without one)", self.version, domain)
        return kw

    def start(self, name: str, domain: str, stream: Any) -> Any:
        rid = self.mstx.range_start(name, **self._kwargs("range_start", domain, stream))
        return rid if rid else None  # 0 = failure (None: a release that swallowed an error): nothing to end

    def end(self, token: Any, domain: str) -> None:
        self.mstx.range_end(token, **self._kwargs("range_end", domain, None))

    def mark(self, message: str, domain: str, stream: Any) -> None:
        self.mstx.mark(message, **self._kwargs("mark", domain, stream))


def load() -> NpuMarkers:
    import torch_npu  # lazy: never at module top (it can break `import torch` without CANN)

    from mindspeed_profiler.backends.npu_release import MARK, RANGE_END, RANGE_START, installed_api

    api = installed_api(torch_npu)
    keywords = {short: api.keywords.get(full) for short, full in
                (("mark", MARK), ("range_start", RANGE_START), ("range_end", RANGE_END))}
    return NpuMarkers(torch_npu.npu.mstx, keywords, api.version)


register_marker_kind(MarkerKind("mstx", load))
