"""A tiny verifiable task for the examples: continue a count to the end of the next block, then stop.

The prompt counts up (mod VOCAB) in blocks of STOP_EVERY (a block ends at a token t with
t % STOP_EVERY == STOP_EVERY - 1); the answer continues the count at least STOP_EVERY tokens, to the
end of a block, then says END. Answers are STOP_EVERY + 1 to 2 x STOP_EVERY tokens long (END
included), spread evenly over the prompts, so the responses have variable lengths like a real
model's; never a very short one, so that the natural lengths have no long tail (the examples'
long-tail knob makes one). Small enough to learn on a CPU in a few iterations, so the examples show reward going up
while the profiler and tracer watch. The reward is rule-based, like MindSpeed-RL's verifier functions.
"""
from __future__ import annotations

import torch

VOCAB = 32              # the counting alphabet: tokens 0 .. VOCAB-1
END = VOCAB             # the end-of-response token
PAD = END               # fills a row after its sample's end (masked out of rewards, log-probs and losses)
VOCAB_SIZE = VOCAB + 1  # the model's vocabulary: the alphabet and END
STOP_EVERY = 4          # a block of the count: an answer ends after the block's last token
LONGEST_ANSWER = 2 * STOP_EVERY   # tokens, END included


def make_prompts(batch: int, prompt_len: int, generator: torch.Generator) -> torch.Tensor:
    """Prompts that count up from a random start: [s, s+1, ..., s+L-1] mod VOCAB."""
    start = torch.randint(0, VOCAB, (batch, 1), generator=generator)
    return (start + torch.arange(prompt_len)) % VOCAB


def successor(prev: torch.Tensor) -> torch.Tensor:
    """The right token at each response position k (the columns) after the token `prev` before it:
    END after a block's last token once the answer has STOP_EVERY tokens (k >= STOP_EVERY), else the
    next count."""
    k = torch.arange(prev.shape[-1])
    stop = (prev % STOP_EVERY == STOP_EVERY - 1) & (k >= STOP_EVERY)
    return torch.where(stop, torch.full_like(prev, END), (prev + 1) % VOCAB)


def length_mask(lengths: torch.Tensor, width: int) -> torch.Tensor:
    """[B, width] 1.0 where a position is inside its row's first lengths[b] tokens, else 0.0."""
    return (torch.arange(width).unsqueeze(0) < lengths.unsqueeze(1)).float()


def answer_lengths(prompts: torch.Tensor) -> torch.Tensor:
    """[B] the right response's length for each prompt: the rest of the block, the next block, END."""
    return (STOP_EVERY - 1 - prompts[:, -1]) % STOP_EVERY + STOP_EVERY + 1


def reward(prompts: torch.Tensor, responses: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Each response's tokens that are the successor of the token before them, counted up to the
    right answer's length, over the longer of the response (its first lengths[b] tokens, END
    included; the padding after it ignored) and the right answer: 1.0 for the right answer, and a
    response that never stops loses every token past the block's end."""
    prev = torch.cat([prompts[:, -1:], responses[:, :-1]], dim=1)
    right_len = answer_lengths(prompts)
    mask = length_mask(torch.minimum(lengths, right_len), responses.shape[1])
    return ((responses == successor(prev)).float() * mask).sum(1) / torch.maximum(lengths, right_len)


def answers(prompts: torch.Tensor, width: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The right responses [B, width] (padded with PAD after END) and their lengths [B], END included."""
    last, lengths = prompts[:, -1:], answer_lengths(prompts).unsqueeze(1)   # counting tokens + END
    k = torch.arange(width).unsqueeze(0)
    out = torch.where(k < lengths - 1, (last + 1 + k) % VOCAB, torch.where(k == lengths - 1, END, PAD))
    return out, lengths.squeeze(1)


def pad_responses(tokens: list[torch.Tensor], value: int = PAD) -> torch.Tensor:
    """Batches of sequences [B_i, W_i] (each worker's batch is as wide as its longest response)
    right-padded to the widest and stacked: [sum B_i, max W_i]."""
    width = max(t.shape[1] for t in tokens)
    return torch.cat([torch.nn.functional.pad(t, (0, width - t.shape[1]), value=value) for t in tokens])
