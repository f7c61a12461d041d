"""A tiny causal LM built here, no model hub: a Qwen2-architecture model (2 layers, hidden 64) and a
byte-level BPE tokenizer trained in a second with the `tokenizers` library on a generated corpus of
words `w0` .. `w39`, saved together as a directory any TRL trainer takes as `model=`."""
from __future__ import annotations

import os
from pathlib import Path

WORDS = [f"w{i}" for i in range(40)]
END = "<end>"


def corpus(lines: int = 400) -> list[str]:
    return [" ".join(WORDS[(i * 7 + j) % len(WORDS)] for j in range(12)) for i in range(lines)]


def build_tiny_model(directory: str | os.PathLike, *, seed: int = 0, hidden: int = 64, layers: int = 2) -> Path:
    """Write the model and its tokenizer into `directory` (returned); the same seed, the same weights."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    directory = Path(directory)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(corpus(), trainers.BpeTrainer(vocab_size=320, special_tokens=[END], show_progress=False,
                                                          initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    end = tok.token_to_id(END)
    PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=END, pad_token=END).save_pretrained(directory)
    cfg = Qwen2Config(vocab_size=tok.get_vocab_size(), hidden_size=hidden, intermediate_size=2 * hidden,
                      num_hidden_layers=layers, num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=256,
                      tie_word_embeddings=False, eos_token_id=end, bos_token_id=end, pad_token_id=end)
    torch.manual_seed(seed)
    Qwen2ForCausalLM(cfg).to(torch.float32).save_pretrained(directory)
    return directory


def prompts(n: int, length: int = 4) -> list[str]:
    """`n` prompts of `length` words."""
    return [" ".join(WORDS[(i + j) % len(WORDS)] for j in range(length)) for i in range(n)]
