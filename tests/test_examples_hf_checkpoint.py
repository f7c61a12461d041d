"""The examples' Megatron-core actor as a Qwen2 model (examples/common/mcore_cpu.py, arch qwen2) and its
Hugging Face checkpoint (examples/common/hf_checkpoint.py): transformers' own Qwen2ForCausalLM, loaded
from the written directory, computes the Megatron model's logits; the conversion refuses what it does
not understand; the default architecture is the one the examples always had.

Real Megatron-core on CPU (its parallel state initialised in this process for the module, torn down
after) and real transformers; the weights are random (larger than Megatron's init, biases and norm
weights too, so that every converted tensor moves the logits)."""
from __future__ import annotations

import json
import warnings

import pytest
import torch

from examples.common import task
from examples.common.mcore_cpu import ModelShape, build_gpt, build_model, causal_mask

from examples.common import hf_checkpoint as hf

SEQ = 16
# float32: transformers and Megatron compute the same functions in different orders (and HF's
# RMSNorm always in float32); measured max |diff| 1.9e-5 / 2.1e-5 with logits up to 12.4 / 7.7
ATOL = 1e-4
SHAPES = {"h64_2heads_1group": dict(layers=2, hidden=64, heads=2, query_groups=1),     # head dim 32
          "h128_4heads_2groups": dict(layers=2, hidden=128, heads=4, query_groups=2)}  # head dim 32, GQA


@pytest.fixture(scope="module")
def megatron():
    """Megatron's parallel state in this process (gloo, world 1), as the example workers have it."""
    import torch.distributed as dist
    from megatron.core import parallel_state

    from examples.common.mcore_cpu import group_store, init_megatron

    ours = not dist.is_initialized()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # Megatron's "Transformer Engine and Apex are not installed"
        init_megatron(store=group_store("127.0.0.1", 0, 1, master=True))
    yield
    if ours:
        parallel_state.destroy_model_parallel()
        dist.destroy_process_group()


def settings(**shape) -> dict:
    return dict(arch="qwen2", prompt_len=8, response_len=8, lr=0.003, **shape)


def qwen2_model(shape: dict, seed: int = 0):
    model = build_model(ModelShape.from_settings(settings(**shape)), task.VOCAB_SIZE, SEQ)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            norm = "norm" in name
            p.copy_(torch.randn(p.shape, generator=gen) * (0.1 if norm else 0.3) + (1.0 if norm else 0.0))
    return model.eval()


@pytest.fixture(scope="module", params=list(SHAPES), ids=list(SHAPES))
def written(request, megatron, tmp_path_factory):
    """(shape, the Megatron model, the checkpoint directory write_checkpoint wrote)."""
    shape = SHAPES[request.param]
    model = qwen2_model(shape)
    directory = hf.write_checkpoint(tmp_path_factory.mktemp("ckpt") / "actor", model.state_dict(), settings(**shape))
    return shape, model, directory


def test_transformers_qwen2_gives_the_megatron_logits(written):
    from transformers import Qwen2ForCausalLM

    shape, model, directory = written
    loaded, info = Qwen2ForCausalLM.from_pretrained(directory, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    tokens = torch.randint(0, task.VOCAB_SIZE, (4, SEQ), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        # as the example workers call the actor (workers.PolicyWorker._logits)
        ours = model(tokens, torch.arange(SEQ).unsqueeze(0).expand(4, -1), causal_mask(SEQ))
        theirs = loaded.eval()(tokens).logits
    assert ours.dtype == theirs.dtype == torch.float32 and ours.shape == theirs.shape == (4, SEQ, task.VOCAB_SIZE)
    assert ours.abs().max() > 1.0   # logits that differ between tokens: a wrong weight shows
    assert (ours - theirs).abs().max().item() < ATOL


def test_config_is_the_megatron_models(written):
    from transformers import AutoConfig

    shape, model, directory = written
    config = AutoConfig.from_pretrained(directory)
    mc = model.config
    assert type(config).__name__ == "Qwen2Config" and config.architectures == ["Qwen2ForCausalLM"]
    assert (config.num_hidden_layers, config.hidden_size, config.num_attention_heads, config.num_key_value_heads,
            config.intermediate_size) == (mc.num_layers, mc.hidden_size, mc.num_attention_heads, mc.num_query_groups,
                                          mc.ffn_hidden_size)
    assert config.num_key_value_heads == shape["query_groups"] < config.num_attention_heads
    assert config.rms_norm_eps == mc.layernorm_epsilon == 1e-6 and mc.normalization == "RMSNorm"
    theta = config.rope_parameters["rope_theta"]
    # Megatron's frequencies are 1 / theta^(2i/d): the second one gives theta back
    head_dim = mc.hidden_size // mc.num_attention_heads
    assert theta == pytest.approx(model.rotary_pos_emb.inv_freq[1].item() ** (-head_dim / 2), rel=1e-5)
    assert not config.tie_word_embeddings and config.vocab_size == task.VOCAB_SIZE
    assert config.max_position_embeddings == SEQ and config.eos_token_id == config.pad_token_id == task.END
    assert json.loads((directory / "config.json").read_text())["dtype"] == "float32"


def test_tokenizer_round_trip(written):
    from tokenizers import Tokenizer
    from transformers import AutoTokenizer
    from transformers.models.qwen2.tokenization_qwen2 import PRETOKENIZE_REGEX

    directory = written[2]
    tok = AutoTokenizer.from_pretrained(directory)
    raw = Tokenizer.from_file(str(directory / "tokenizer.json"))   # the file as it is, as vLLM's detokenizer reads it
    assert len(tok) == raw.get_vocab_size() == task.VOCAB_SIZE
    assert tok.eos_token_id == tok.pad_token_id == task.END and tok.bos_token_id is None
    assert tok.convert_ids_to_tokens(task.END) == hf.END_TOKEN
    ids = torch.randint(0, task.VOCAB_SIZE, (200,), generator=torch.Generator().manual_seed(2)).tolist() + [task.END]
    text = tok.decode(ids)
    assert len(text) == len(ids) + (len(hf.END_TOKEN) - 1) * ids.count(task.END)   # a letter a token
    assert tok(text).input_ids == raw.encode(text).ids == ids
    assert tok.decode(ids, skip_special_tokens=True) == "".join(hf.token_texts()[i] for i in ids if i != task.END)
    assert hf.QWEN2_SPLIT == PRETOKENIZE_REGEX   # the split Qwen2Tokenizer rebuilds the file with


def test_conversion_renames_and_views_where_it_can(megatron):
    """The conversion runs every iteration: only q/k/v with several query groups are copied."""
    for name, shape in SHAPES.items():
        sd = qwen2_model(shape).state_dict()
        out = hf.to_hf_state_dict(sd, ModelShape.from_settings(settings(**shape)))
        assert sorted(out) == sorted(hf.hf_names(ModelShape.from_settings(settings(**shape))))
        storages = {t.untyped_storage().data_ptr() for t in sd.values() if torch.is_tensor(t)}
        copied = sorted(k for k, t in out.items() if t.untyped_storage().data_ptr() not in storages)
        many_groups = shape["query_groups"] > 1
        assert copied == (sorted(f"model.layers.{i}.self_attn.{p}_proj.{kind}" for i in range(2) for p in "qkv"
                                 for kind in ("weight", "bias")) if many_groups else []), name
        assert out["model.embed_tokens.weight"] is sd["embedding.word_embeddings.weight"]


def test_grouped_qkv_split_by_hand():
    """Per query group: its q heads, then its k head, then its v head (Megatron's linear_qkv rows)."""
    shape = ModelShape("qwen2", layers=1, hidden=4, heads=4, query_groups=2)   # head dim 1, 2 q heads a group
    rows = torch.arange(8.0)   # group 0: q0 q1 k0 v0 | group 1: q2 q3 k1 v1
    out = hf._qkv(shape, "x", rows, "model.layers.0", "bias")
    assert out["model.layers.0.self_attn.q_proj.bias"].tolist() == [0, 1, 4, 5]
    assert out["model.layers.0.self_attn.k_proj.bias"].tolist() == [2, 6]
    assert out["model.layers.0.self_attn.v_proj.bias"].tolist() == [3, 7]


def test_conversion_refuses_what_it_does_not_know(megatron):
    shape = SHAPES["h64_2heads_1group"]
    sd = qwen2_model(shape).state_dict()
    arch = ModelShape.from_settings(settings(**shape))
    assert any(k.endswith("._extra_state") for k in sd)   # skipped, not refused
    hf.to_hf_state_dict(sd, arch)
    cases = {"decoder.layers.0.self_attention.linear_proj.bias": torch.zeros(64),   # a linear bias Qwen2 has not
             "decoder.layers.0.mlp.router.weight": torch.zeros(4, 64),
             "decoder.layers.2.input_layernorm.weight": torch.zeros(64),          # past model.layers
             "decoder.layers.0.self_attention.linear_qkv.layer_norm_weight": torch.zeros(64)}   # the norm twice
    for key, value in cases.items():
        with pytest.raises(ValueError, match=key.replace(".", r"\.")):
            hf.to_hf_state_dict({**sd, key: value}, arch)
    with pytest.raises(ValueError, match="lm_head.weight"):
        hf.to_hf_state_dict({k: v for k, v in sd.items() if k != "output_layer.weight"}, arch)
    bad_qkv = {**sd, "decoder.layers.1.self_attention.linear_qkv.weight": torch.zeros(192, 64)}
    with pytest.raises(ValueError, match=r"linear_qkv\.weight: shape \(192, 64\), expected \(128, 64\)"):
        hf.to_hf_state_dict(bad_qkv, arch)
    with pytest.raises(ValueError, match="arch 'qwen2' only"):
        hf.to_hf_state_dict(sd, ModelShape.from_settings({**settings(**shape), "arch": "gpt"}))


def test_transformer_engine_spec_norm_names_are_read(megatron):
    """TE's spec keeps the norms inside the next linear: the same HF weights come out."""
    shape = SHAPES["h64_2heads_1group"]
    sd = qwen2_model(shape).state_dict()
    arch = ModelShape.from_settings(settings(**shape))
    te = {k.replace("input_layernorm.weight", "self_attention.linear_qkv.layer_norm_weight")
          .replace("pre_mlp_layernorm.weight", "mlp.linear_fc1.layer_norm_weight"): v for k, v in sd.items()}
    assert te.keys() != sd.keys()
    local, fused = hf.to_hf_state_dict(sd, arch), hf.to_hf_state_dict(te, arch)
    assert local.keys() == fused.keys() and all(torch.equal(local[k], fused[k]) for k in local)


def test_write_checkpoint_replaces_whole_and_cleans_up(megatron, tmp_path):
    from safetensors.torch import load_file

    shape = SHAPES["h64_2heads_1group"]
    first, second = qwen2_model(shape, seed=0), qwen2_model(shape, seed=1)
    target = tmp_path / "actor"
    hf.write_checkpoint(target, first.state_dict(), settings(**shape))
    hf.write_checkpoint(target, second.state_dict(), settings(**shape))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["actor"]   # no staging or old directory left
    assert sorted(p.name for p in target.iterdir()) == ["config.json", "model.safetensors", "tokenizer.json",
                                                        "tokenizer_config.json"]
    embed = load_file(str(target / "model.safetensors"))["model.embed_tokens.weight"]
    assert torch.equal(embed, second.state_dict()["embedding.word_embeddings.weight"])
    broken = {**first.state_dict(), "decoder.layers.0.mlp.router.weight": torch.zeros(1)}
    with pytest.raises(ValueError, match="router"):
        hf.write_checkpoint(target, broken, settings(**shape))
    assert torch.equal(load_file(str(target / "model.safetensors"))["model.embed_tokens.weight"], embed)
    with pytest.raises(ValueError, match="prompt_len and response_len"):
        hf.write_checkpoint(tmp_path / "other", first.state_dict(), dict(arch="qwen2", **shape))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["actor"]


@pytest.mark.parametrize("bad, field", [
    (dict(arch="llama"), "model.arch = 'llama': allowed: gpt, qwen2"),
    (dict(heads=3), "model.hidden = 64: a multiple of model.heads = 3"),
    (dict(query_groups=3), "model.query_groups = 3: a divisor of model.heads = 4"),
    (dict(layers=True), "model.layers = True: a whole number >= 1"),
    (dict(ffn_hidden=0), "model.ffn_hidden = 0: a whole number >= 1"),
    (dict(norm_eps=-1.0), "model.norm_eps = -1.0: a number > 0"),
    (dict(arch="gpt", rope_theta=1e6), "model.rope_theta = 1000000.0: only for model.arch = qwen2"),
])
def test_model_settings_errors_name_the_field(bad, field):
    with pytest.raises(ValueError) as err:
        ModelShape.from_settings({"arch": "qwen2", "layers": 2, "hidden": 64, "heads": 4, "lr": 0.003, **bad})
    assert str(err.value).startswith(field)


# the default architecture, as build_gpt made it before the qwen2 choice existed (read from that code)
DEFAULT_SHAPES = {"embedding.word_embeddings.weight": (33, 64), "embedding.position_embeddings.weight": (16, 64),
                  "decoder.final_layernorm.weight": (64,), "decoder.final_layernorm.bias": (64,),
                  "output_layer.weight": (33, 64)}
for _i in range(2):
    DEFAULT_SHAPES.update({f"decoder.layers.{_i}.{k}": v for k, v in {
        "input_layernorm.weight": (64,), "input_layernorm.bias": (64,),
        "self_attention.linear_proj.weight": (64, 64), "self_attention.linear_proj.bias": (64,),
        "self_attention.linear_qkv.weight": (192, 64), "self_attention.linear_qkv.bias": (192,),
        "pre_mlp_layernorm.weight": (64,), "pre_mlp_layernorm.bias": (64,),
        "mlp.linear_fc1.weight": (256, 64), "mlp.linear_fc1.bias": (256,),
        "mlp.linear_fc2.weight": (64, 256), "mlp.linear_fc2.bias": (64,)}.items()})


def test_default_architecture_unchanged(megatron):
    model = build_gpt(task.VOCAB_SIZE, SEQ, num_layers=2, hidden=64, heads=4)
    assert {k: tuple(v.shape) for k, v in model.state_dict().items() if torch.is_tensor(v)} == DEFAULT_SHAPES
    c = model.config
    assert (c.normalization, c.activation_func, c.layernorm_epsilon, c.gated_linear_unit, c.add_bias_linear,
            c.num_query_groups, c.ffn_hidden_size) == ("LayerNorm", torch.nn.functional.gelu, 1e-5, False, True, 4, 256)
    assert model.position_embedding_type == "learned_absolute" and not model.share_embeddings_and_output_weights
    assert ModelShape().transformer_options() == {}   # nothing passed beyond the sizes: Megatron's defaults
