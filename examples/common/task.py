"""A tiny verifiable task for the examples: continue a sequence by counting up (mod vocab).

Small enough to learn on a CPU in a few iterations, so the examples show reward going up while the
profiler and tracer watch. The reward is rule-based, like MindSpeed-RL's verifier functions.
"""
from __future__ import annotations

import torch

VOCAB = 32


def make_prompts(batch: int, prompt_len: int, generator: torch.Generator) -> torch.Tensor:
    """Prompts that count up from a random start: [s, s+1, ..., s+L-1] mod VOCAB."""
    start = torch.randint(0, VOCAB, (batch, 1), generator=generator)
    return (start + torch.arange(prompt_len)) % VOCAB


def reward(prompts: torch.Tensor, responses: torch.Tensor) -> torch.Tensor:
    """Fraction of response tokens that continue the count correctly (each from its predecessor)."""
    prev = torch.cat([prompts[:, -1:], responses[:, :-1]], dim=1)
    return ((prev + 1) % VOCAB == responses).float().mean(dim=1)


def preference_pairs(batch: int, prompt_len: int, response_len: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """DPO pairs: chosen continues the count, rejected repeats random tokens. Returns full sequences."""
    prompts = make_prompts(batch, prompt_len, generator)
    chosen = (prompts[:, -1:] + 1 + torch.arange(response_len)) % VOCAB
    rejected = torch.randint(0, VOCAB, (batch, response_len), generator=generator)
    return torch.cat([prompts, chosen], 1), torch.cat([prompts, rejected], 1)
