"""Fakes of vLLM 0.33's RequestOutput / CompletionOutput / RequestStateStats and SGLang 0.5.23's
result dict, built from the recorded snapshots (mindspeed_profiler/data/vllm-0.33.0.json,
sglang-0.5.23.json; docs/engines_api.md) rather than written by hand: each fake class has exactly
the recorded fields (`__slots__`, so reading any other attribute fails as it would on the real
class), RequestOutput's constructor takes the recorded parameters in their order, and an SGLang
`meta_info` may hold only the keys the recorded sources write. vLLM and SGLang need a GPU: they
cannot run here."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parents[1] / "mindspeed_profiler" / "data"
VLLM = json.loads((DATA / "vllm-0.33.0.json").read_text())
SGLANG = json.loads((DATA / "sglang-0.5.23.json").read_text())


def _dataclass(qualname: str) -> type:
    """A slotted dataclass with the recorded class's fields, in order, with its literal defaults."""
    spec = VLLM["classes"][qualname]
    fields = []
    for f in spec["fields"]:
        if f.get("has_default"):
            fields.append((f["name"], Any, dataclasses.field(default=f.get("default"))))
        else:
            fields.append((f["name"], Any))
    return dataclasses.make_dataclass(qualname.rsplit(".", 1)[1], fields, slots=True)


RequestStateStats = _dataclass("vllm.v1.metrics.stats.RequestStateStats")
CompletionOutput = _dataclass("vllm.outputs.CompletionOutput")
REQUEST_OUTPUT_ATTRIBUTES = tuple(VLLM["instance_attributes"]["vllm.outputs.RequestOutput"])
_INIT = [p for p in VLLM["functions"]["vllm.outputs.RequestOutput.__init__"]["params"]
         if p["name"] != "self" and p["kind"] != "VAR_KEYWORD"]


class RequestOutput:
    """vLLM's RequestOutput: a plain class (vllm/outputs.py:169) with the recorded attributes only."""

    __slots__ = REQUEST_OUTPUT_ATTRIBUTES

    def __init__(self, *args: Any, **kwargs: Any):
        names = [p["name"] for p in _INIT]
        given = dict(zip(names, args))
        for key, value in kwargs.items():
            if key not in names or key in given:
                raise TypeError(f"RequestOutput() got an unexpected or repeated argument {key!r}")
            given[key] = value
        for p in _INIT:
            if p["name"] not in given and not p["has_default"]:
                raise TypeError(f"RequestOutput() missing {p['name']!r}")
        for attr in REQUEST_OUTPUT_ATTRIBUTES:
            setattr(self, attr, given.get(attr))


def completion(index: int = 0, n_tokens: int = 8, finish_reason: str | None = "stop") -> Any:
    return CompletionOutput(index=index, text="", token_ids=list(range(n_tokens)), cumulative_logprob=None,
                            logprobs=None, finish_reason=finish_reason)


def request_output(request_id: str, n_prompt: int = 4, outputs: list[Any] | None = None, metrics: Any = None) -> Any:
    return RequestOutput(request_id, None, list(range(n_prompt)), None, outputs if outputs is not None else [completion()],
                         True, metrics)


# SGLang: every key its sources write into meta_info (TokenizerManager._handle_batch_output and the
# two convert_to_output_meta_info), and the result dict's own keys
_KEYS = SGLANG["dict_keys"]
META_INFO_KEYS = frozenset(
    set(_KEYS["sglang.srt.managers.tokenizer_manager.TokenizerManager._handle_batch_output"]["keys"])
    | set(_KEYS["sglang.srt.observability.req_time_stats.APIServerReqTimeStats.convert_to_output_meta_info"]["keys"])
    | set(_KEYS["sglang.srt.observability.req_time_stats.SchedulerReqTimeStats.convert_to_output_meta_info"]["keys"]))


def sglang_result(**meta: Any) -> dict[str, Any]:
    """`Engine.generate`'s dict for one prompt; meta_info keys checked against the snapshot."""
    unknown = set(meta) - META_INFO_KEYS
    assert not unknown, f"not a meta_info key of SGLang 0.5.23: {sorted(unknown)}"
    return {"text": "...", "output_ids": [1, 2, 3], "meta_info": meta}
