"""The Megatron-core actor (arch qwen2, examples/common/mcore_cpu.py) as a Hugging Face Qwen2 checkpoint.

Pure functions: the Megatron state dict to HF Qwen2 names and layouts (the rollout's weight sync
calls it every iteration, its `convert` phase: the result can go straight to vLLM's
`model.load_weights`), the HF config, and the task's tokenizer; then `write_checkpoint`, the one
function with I/O, writes a directory that transformers and vLLM load (config.json,
model.safetensors, tokenizer.json, tokenizer_config.json). No transformers import here: the config
is Qwen2Config's fields as plain JSON.

Megatron-core 0.16.1's local layer spec (what build_model uses) keeps the norms as modules of
their own (`input_layernorm`, `pre_mlp_layernorm`); Transformer Engine's spec fuses them into the
next linear (`linear_qkv.layer_norm_weight`, `linear_fc1.layer_norm_weight`): both are read.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import string
import tempfile
from pathlib import Path
from typing import Any, Callable, Mapping

import torch

from examples.common import task
from examples.common.mcore_cpu import ModelShape, max_positions

END_TOKEN = "<end>"   # task.END's text (token_texts)
# transformers' Qwen2Tokenizer's pre-tokenizer split (models/qwen2/tokenization_qwen2.py, 5.19)
QWEN2_SPLIT = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
               r"""|\s*[\r\n]+|\s+(?!\S)|\s+""")

_LAYER = re.compile(r"decoder\.layers\.(\d+)\.(.+)")
_TOP = {"embedding.word_embeddings.weight": "model.embed_tokens.weight",
        "decoder.final_layernorm.weight": "model.norm.weight",
        "output_layer.weight": "lm_head.weight"}


def _qkv(shape: ModelShape, key: str, fused: torch.Tensor, hf: str, kind: str) -> dict[str, torch.Tensor]:
    """Megatron's grouped QKV (rows: per query group, the group's q heads, then its k head, then its
    v head) as HF's q_proj, k_proj, v_proj. Views where the rows are already contiguous (one group);
    a copy only where the layout change needs one."""
    per_group = shape.heads // shape.groups
    rows = shape.groups * (per_group + 2) * shape.head_dim
    expected = (rows, shape.hidden) if kind == "weight" else (rows,)
    if tuple(fused.shape) != expected:
        raise ValueError(f"{key}: shape {tuple(fused.shape)}, expected {expected} for {shape.heads} heads "
                         f"in {shape.groups} query groups of head dim {shape.head_dim}")
    grouped = fused.unflatten(0, (shape.groups, per_group + 2, shape.head_dim))
    rest = tuple(fused.shape[1:])
    return {f"{hf}.self_attn.q_proj.{kind}": grouped[:, :per_group].reshape(shape.heads * shape.head_dim, *rest),
            f"{hf}.self_attn.k_proj.{kind}": grouped[:, per_group].reshape(shape.groups * shape.head_dim, *rest),
            f"{hf}.self_attn.v_proj.{kind}": grouped[:, per_group + 1].reshape(shape.groups * shape.head_dim, *rest)}


def _gate_up(shape: ModelShape, key: str, fused: torch.Tensor, hf: str) -> dict[str, torch.Tensor]:
    """linear_fc1 = [gate; up] (Megatron's gated linear unit: silu(first half) * second half)."""
    if tuple(fused.shape) != (2 * shape.ffn, shape.hidden):
        raise ValueError(f"{key}: shape {tuple(fused.shape)}, expected ({2 * shape.ffn}, {shape.hidden}): "
                         f"[gate; up] of ffn_hidden {shape.ffn}")
    gate, up = fused.chunk(2, dim=0)
    return {f"{hf}.mlp.gate_proj.weight": gate, f"{hf}.mlp.up_proj.weight": up}


def _renamed(name: str) -> Callable[[ModelShape, str, torch.Tensor, str], dict[str, torch.Tensor]]:
    return lambda shape, key, value, hf: {f"{hf}.{name}": value}


# a layer's Megatron keys (after `decoder.layers.N.`) and what each becomes under `model.layers.N`
_LAYER_KEYS: dict[str, Callable[[ModelShape, str, torch.Tensor, str], dict[str, torch.Tensor]]] = {
    "input_layernorm.weight": _renamed("input_layernorm.weight"),
    "self_attention.linear_qkv.layer_norm_weight": _renamed("input_layernorm.weight"),   # TE spec
    "self_attention.linear_qkv.weight": lambda s, k, v, hf: _qkv(s, k, v, hf, "weight"),
    "self_attention.linear_qkv.bias": lambda s, k, v, hf: _qkv(s, k, v, hf, "bias"),
    "self_attention.linear_proj.weight": _renamed("self_attn.o_proj.weight"),
    "pre_mlp_layernorm.weight": _renamed("post_attention_layernorm.weight"),
    "mlp.linear_fc1.layer_norm_weight": _renamed("post_attention_layernorm.weight"),      # TE spec
    "mlp.linear_fc1.weight": _gate_up,
    "mlp.linear_fc2.weight": _renamed("mlp.down_proj.weight"),
}


def hf_names(shape: ModelShape) -> list[str]:
    """Every weight an HF Qwen2ForCausalLM of this shape has (untied embeddings)."""
    per_layer = ["input_layernorm.weight", "post_attention_layernorm.weight", "self_attn.o_proj.weight",
                 "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight"]
    per_layer += [f"self_attn.{p}_proj.{kind}" for p in "qkv" for kind in ("weight", "bias")]
    return sorted(_TOP.values()) + [f"model.layers.{i}.{name}" for i in range(shape.layers) for name in per_layer]


def to_hf_state_dict(megatron_state_dict: Mapping[str, Any], shape: ModelShape) -> dict[str, torch.Tensor]:
    """The Megatron qwen2-arch GPTModel's state dict under HF Qwen2 names and layouts. The tensors
    are the input's own (renames) or views of them (the splits) wherever the layout allows; only q/k/v
    with several query groups are copied. `_extra_state` entries are skipped; any other key it does
    not know, a weight named twice, a layer past `shape.layers` or a weight missing: ValueError
    naming it (nothing is dropped in silence)."""
    if shape.arch != "qwen2":
        raise ValueError(f"model.arch = {shape.arch!r}: the HF conversion is for arch 'qwen2' only")
    out: dict[str, torch.Tensor] = {}
    for key, value in megatron_state_dict.items():
        if key.endswith("._extra_state"):
            continue
        layer = _LAYER.fullmatch(key)
        if key in _TOP:
            converted = {_TOP[key]: value}
        elif layer and layer.group(2) in _LAYER_KEYS:
            n = int(layer.group(1))
            if n >= shape.layers:
                raise ValueError(f"{key}: layer {n} of a model of {shape.layers} layers (model.layers)")
            converted = _LAYER_KEYS[layer.group(2)](shape, key, value, f"model.layers.{n}")
        else:
            raise ValueError(f"{key}: not a weight of a Megatron qwen2-arch GPTModel (local or TE layer spec); "
                             f"known: {', '.join(sorted(_TOP))}, decoder.layers.<N>.{{{', '.join(_LAYER_KEYS)}}}")
        twice = out.keys() & converted.keys()
        if twice:
            raise ValueError(f"{key}: gives {sorted(twice)[0]} a second time (a norm both fused and separate?)")
        out.update(converted)
    missing = [name for name in hf_names(shape) if name not in out]
    if missing:
        raise ValueError(f"the Megatron state dict lacks what becomes {', '.join(missing[:4])}"
                         f"{' ...' if len(missing) > 4 else ''} ({len(missing)} missing; tied embeddings? "
                         f"the qwen2 arch keeps output_layer.weight)")
    return out


def hf_config(shape: ModelShape, vocab_size: int, max_position_embeddings: int) -> dict[str, Any]:
    """Qwen2Config's fields (config.json) for this shape; eos and pad: the task's END."""
    return {
        "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "dtype": "float32",
        "vocab_size": vocab_size, "hidden_size": shape.hidden, "intermediate_size": shape.ffn,
        "num_hidden_layers": shape.layers, "num_attention_heads": shape.heads,
        "num_key_value_heads": shape.groups, "head_dim": shape.head_dim, "hidden_act": "silu",
        "max_position_embeddings": max_position_embeddings, "rms_norm_eps": shape.eps,
        "rope_parameters": {"rope_type": "default", "rope_theta": shape.theta},
        "tie_word_embeddings": False, "use_sliding_window": False, "sliding_window": None,
        "max_window_layers": shape.layers, "layer_types": ["full_attention"] * shape.layers,
        "attention_dropout": 0.0, "initializer_range": 0.02, "use_cache": True,
        "bos_token_id": None, "eos_token_id": task.END, "pad_token_id": task.PAD,
    }


def token_texts() -> list[str]:
    """The task's tokens as text, by id: one letter per counting token ("a" .. "z", "A" .. "F"),
    then END. Single letters, because transformers (5.x) and so vLLM load a qwen2 checkpoint's
    tokenizer as Qwen2Tokenizer whatever tokenizer_config.json says: a byte-level BPE rebuilt from
    the file's vocabulary and merges with Qwen2's pre-tokenizer, which splits "t12" into "t", "1",
    "2". With one letter a token and no merges every string of them encodes one token a letter."""
    return list(string.ascii_letters[:task.VOCAB]) + [END_TOKEN]


def tokenizer_files() -> dict[str, str]:
    """tokenizer.json (Qwen2Tokenizer's own pipeline: NFC, Qwen2's split regex, byte-level BPE
    over the task's tokens with no merges, END a special token) and tokenizer_config.json (eos =
    pad = END, no BOS, no UNK), as text. Encoding and decoding are the same whether a reader
    takes tokenizer.json as it is (the `tokenizers` library) or rebuilds Qwen2Tokenizer."""
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers

    texts = token_texts()
    tok = Tokenizer(models.BPE({t: i for i, t in enumerate(texts)}, [], unk_token=None, continuing_subword_prefix="",
                               end_of_word_suffix="", fuse_unk=False, byte_fallback=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([END_TOKEN])
    config = {"tokenizer_class": "Qwen2Tokenizer", "eos_token": END_TOKEN, "pad_token": END_TOKEN,
              "bos_token": None, "unk_token": None, "add_prefix_space": False, "model_max_length": 1 << 20,
              "clean_up_tokenization_spaces": False}
    return {"tokenizer.json": tok.to_str(), "tokenizer_config.json": json.dumps(config, indent=2)}


def write_checkpoint(directory: str | os.PathLike, megatron_state_dict: Mapping[str, Any],
                     model_settings: dict[str, Any]) -> Path:
    """Write the qwen2-arch Megatron model's weights as an HF Qwen2 checkpoint directory
    (config.json, model.safetensors, tokenizer.json, tokenizer_config.json) at `directory`.
    `model_settings`: the trainer's `model` settings (ModelShape.from_settings; `prompt_len`,
    `response_len` and `long_tail_tokens` give max_position_embeddings, as the actor's positions).
    Written into a new directory beside it, then renamed into place: a reader sees the old complete
    directory, none, or the new complete one, never part of one."""
    return write_hf_checkpoint(directory, to_hf_state_dict(megatron_state_dict, ModelShape.from_settings(model_settings)),
                               model_settings)


def write_hf_checkpoint(directory: str | os.PathLike, weights: Mapping[str, torch.Tensor],
                        model_settings: dict[str, Any]) -> Path:
    """write_checkpoint for weights already in HF names (to_hf_state_dict's: what the actor sends
    the rollout, which writes its engine's checkpoint on its own node)."""
    from safetensors.torch import save_file

    shape = ModelShape.from_settings(model_settings)
    if "prompt_len" not in model_settings or "response_len" not in model_settings:
        raise ValueError("model settings: prompt_len and response_len are needed (the checkpoint's "
                         f"max_position_embeddings); given: {', '.join(sorted(model_settings))}")
    if "model.embed_tokens.weight" not in weights:
        raise ValueError("weights: model.embed_tokens.weight is missing (not an HF Qwen2 state dict: to_hf_state_dict)")
    vocab = weights["model.embed_tokens.weight"].shape[0]
    if vocab != task.VOCAB_SIZE:
        raise ValueError(f"embedding.word_embeddings.weight has {vocab} rows: the task's tokenizer has "
                         f"{task.VOCAB_SIZE} tokens (task.VOCAB_SIZE)")
    files = {"config.json": json.dumps(hf_config(shape, vocab, max_positions(model_settings)), indent=2),
             **tokenizer_files()}
    target = Path(directory)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        staging.chmod(0o755)   # mkdtemp's 0700 would stay on the published directory
        # safetensors refuses non-contiguous tensors (none from to_hf_state_dict: reshape makes them so)
        save_file({k: v.detach().contiguous() for k, v in weights.items()}, str(staging / "model.safetensors"),
                  metadata={"format": "pt"})
        for name, text in files.items():
            (staging / name).write_text(text)
        _publish(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return target


def _publish(staging: Path, target: Path) -> None:
    """Rename the complete `staging` directory to `target`; an existing `target` is moved aside
    first and removed after (POSIX rename cannot replace a non-empty directory)."""
    try:
        os.rename(staging, target)
        return
    except OSError:
        if not target.exists():
            raise
    old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old.", dir=target.parent))
    os.rename(target, old / target.name)
    os.rename(staging, target)
    shutil.rmtree(old, ignore_errors=True)
