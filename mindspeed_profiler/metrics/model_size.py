"""Pure: how big a model is, and the FLOPs one token costs it.

    ModelSize(parameters=N, layers=..., hidden=..., ...)   what the tracker needs (N), and what it came from
    from_megatron(config_or_model)                          N by Megatron-core's own parameter formula
    from_module(torch_module)                               N = the sum of the module's parameters' numel

The parameter formula (the one Megatron-LM's `megatron/training/theoretical_memory_usage.py` uses,
biases and the position embedding left out), for L layers of hidden size h, FFN size f, a attention
heads of kv_channels d (default h / a), g query groups (default a, GQA: fewer), vocabulary V:

    attention   2 h^2 * (d a / h) * (1 + g / a)      Q and the output projection, K and V per group
    MLP         2 h f * (3/2 if gated_linear_unit)   (MoE: the moe_router_topk experts a token is routed
                                                     to, of moe_ffn_hidden_size, plus the shared expert)
    norms       4 h per layer, plus 2 h for the final norm
    embedding   V h, twice when the output layer is not tied to the embedding

    N = L * (attention + MLP + 4 h) + 2 h + V h * (1 or 2)

FLOPs per token: forward 2 N, forward + backward 6 N (the backward pass costs twice the forward).
Not counted: the attention score and value products (2 * 2 * seq * h per layer forward, which grow
with the sequence length), activation recomputation (a recomputed forward adds 2 N), and the
embedding lookup being no matmul. So the FLOPs are the dense-matmul estimate every MFU number of the
RL frameworks (verl, OpenRLHF) starts from: comparable across runs, low for long sequences.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from types import SimpleNamespace
from typing import Any

from mindspeed_profiler.core import formats

FORWARD_FLOPS_PER_PARAM, TRAIN_FLOPS_PER_PARAM = formats.FORWARD_FLOPS_PER_PARAM, formats.TRAIN_FLOPS_PER_PARAM


@dataclass(frozen=True)
class ModelSize:
    """`parameters`: the parameters a token passes through (dense: all of them). The shape fields
    are what it was computed from, when known (None otherwise). `source`: "megatron" (the formula),
    "module" (sum of numel) or "given"."""

    parameters: int
    layers: int | None = None
    hidden: int | None = None
    ffn_hidden: int | None = None
    vocab: int | None = None
    heads: int | None = None
    source: str = "given"

    def __post_init__(self) -> None:
        if isinstance(self.parameters, bool) or not isinstance(self.parameters, int) or self.parameters < 1:
            raise ValueError(f"ModelSize(parameters=...): got {self.parameters!r}; expected an integer >= 1")

    def flops_per_token(self, train: bool) -> int:
        """6 N for a forward + backward pass (`train`), else 2 N."""
        return (TRAIN_FLOPS_PER_PARAM if train else FORWARD_FLOPS_PER_PARAM) * self.parameters


def _config_of(obj: Any) -> Any:
    """The TransformerConfig-like object: `obj` itself, or a model's `.config`."""
    if hasattr(obj, "num_layers") and hasattr(obj, "hidden_size"):
        return obj
    cfg = getattr(obj, "config", None)
    if cfg is not None and hasattr(cfg, "num_layers") and hasattr(cfg, "hidden_size"):
        return cfg
    raise TypeError(f"expected a Megatron-core TransformerConfig (num_layers, hidden_size, num_attention_heads) "
                    f"or a model with one as .config, got {type(obj).__name__}")


def _pos_int(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name}: got {value!r}; expected an integer >= 1")
    return value


def looks_like_megatron(obj: Any) -> bool:
    try:
        _config_of(obj)
        return True
    except TypeError:
        return False


def from_megatron(obj: Any, vocab_size: int | None = None, *, tied_embeddings: bool | None = None) -> ModelSize:
    """N by the formula above, from a TransformerConfig-like `obj` (num_layers, hidden_size,
    num_attention_heads; ffn_hidden_size default 4 h; num_query_groups, kv_channels,
    gated_linear_unit, num_moe_experts / moe_router_topk / moe_ffn_hidden_size /
    moe_shared_expert_intermediate_size when set) or a model holding one as `.config` (a GPTModel:
    its vocab_size and share_embeddings_and_output_weights are read too).

    `vocab_size`: the (padded) vocabulary; default the object's padded_vocab_size / vocab_size (or
    the model's); none known: the embedding is left out. `tied_embeddings`: whether the output layer
    shares the embedding's weights; default the model's share_embeddings_and_output_weights, else
    not untie_embeddings_and_output_weights, else tied."""
    cfg = _config_of(obj)
    layers = _pos_int(cfg.num_layers, "num_layers")
    h = _pos_int(cfg.hidden_size, "hidden_size")
    heads = _pos_int(getattr(cfg, "num_attention_heads", None), "num_attention_heads")
    ffn = getattr(cfg, "ffn_hidden_size", None) or 4 * h
    groups = getattr(cfg, "num_query_groups", None) or heads
    kv = getattr(cfg, "kv_channels", None) or h // heads
    q_ratio = kv * heads / h
    attention = 2 * h * h * q_ratio * (1 + groups / heads)
    gated = 1.5 if getattr(cfg, "gated_linear_unit", False) else 1.0
    experts = getattr(cfg, "num_moe_experts", None)
    if experts:
        topk = getattr(cfg, "moe_router_topk", None) or 1
        expert_ffn = getattr(cfg, "moe_ffn_hidden_size", None) or ffn
        shared = getattr(cfg, "moe_shared_expert_intermediate_size", None) or 0
        mlp = 2 * h * gated * (topk * expert_ffn + shared)
    else:
        mlp = 2 * h * ffn * gated
    body = layers * (attention + mlp + 4 * h) + 2 * h
    vocab = vocab_size
    for holder, attr in ((cfg, "padded_vocab_size"), (cfg, "vocab_size"), (obj, "padded_vocab_size"), (obj, "vocab_size")):
        if vocab is None:
            v = getattr(holder, attr, None)
            vocab = v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else None
    if vocab is not None:
        _pos_int(vocab, "vocab_size")
    if tied_embeddings is None:
        shared_out = getattr(obj, "share_embeddings_and_output_weights", None)
        untie = getattr(cfg, "untie_embeddings_and_output_weights", None)
        tied_embeddings = bool(shared_out) if shared_out is not None else (not untie if untie is not None else True)
    embedding = (vocab or 0) * h * (1 if tied_embeddings else 2)
    return ModelSize(parameters=int(round(body + embedding)), layers=layers, hidden=h, ffn_hidden=ffn, vocab=vocab,
                     heads=heads, source="megatron")


def from_module(module: Any) -> ModelSize:
    """N = the sum of numel over `module.parameters()` (a torch.nn.Module; shared parameters once).
    Under tensor or pipeline parallelism that is this rank's shard."""
    params = getattr(module, "parameters", None)
    if not callable(params):
        raise TypeError(f"expected a torch.nn.Module (something with .parameters()), got {type(module).__name__}")
    seen: set[int] = set()
    total = 0
    for p in params():
        if id(p) not in seen:
            seen.add(id(p))
            total += int(p.numel())
    if total < 1:
        raise ValueError(f"{type(module).__name__} has no parameters: its size is unknown")
    return ModelSize(parameters=total, source="module")


def size_of(model_or_config: Any = None, *, parameters: int | None = None, layers: int | None = None,
            hidden: int | None = None, ffn_hidden: int | None = None, vocab: int | None = None,
            heads: int | None = None) -> ModelSize:
    """What `IntegratedProfiler.set_model` was given, as a ModelSize: a ModelSize as it is; a
    Megatron-core model or config by from_megatron; any other torch.nn.Module by from_module; no
    object: `parameters`, or the shape (`layers`, `hidden`, `heads`, optionally `ffn_hidden`,
    `vocab`) by the formula. A keyword given with an object replaces that field."""
    if model_or_config is None:
        if layers is not None or hidden is not None or heads is not None:
            shape = SimpleNamespace(num_layers=layers, hidden_size=hidden, num_attention_heads=heads, ffn_hidden_size=ffn_hidden)
            return from_megatron(shape, vocab)
        if parameters is None:
            raise ValueError("set_model(): give a model or config, parameters=N, or layers= hidden= heads=")
        return ModelSize(parameters=parameters)
    if isinstance(model_or_config, ModelSize):
        size = model_or_config
    elif looks_like_megatron(model_or_config):
        size = from_megatron(model_or_config, vocab)
    else:
        size = from_module(model_or_config)
    given = {k: v for k, v in (("parameters", parameters), ("layers", layers), ("hidden", hidden),
                               ("ffn_hidden", ffn_hidden), ("vocab", vocab), ("heads", heads)) if v is not None}
    if given:
        size = replace(size, **given, source="given" if "parameters" in given else size.source)
    return size
