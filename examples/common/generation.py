"""The examples' batched sampler: token by token, each sample up to its end token or its token limit.

Like a real engine's batch, the decode loop runs until the batch's longest sample is done: a few
long samples keep it going while the others wait (the long tail). Each sample's times are the wall
clock of the decode steps (time.time()), for the per-sample records (docs/rollout.md).
No model, Ray or profiler here: the model comes in as a function (tokens -> next-token logits).
"""
from __future__ import annotations

from dataclasses import dataclass
import time
from typing import Any, Callable

import torch

from examples.common import task

STOP, LENGTH = "stop", "length"   # finish reasons, as vLLM names them


@dataclass(frozen=True)
class Plan:
    """Each sample's token limit (max_tokens) and whether it ignores the end token."""
    limits: list[int]
    ignore_end: list[bool]


def plan(batch: int, response_len: int, long_tail_every: int = 0, long_tail_tokens: int = 0) -> Plan:
    """response_len tokens at most per sample; with long_tail_every=K > 0, each sample whose index in
    the batch is a multiple of K ignores the end token and runs to long_tail_tokens (the long tail
    made on purpose). K = 0: off."""
    tail = [long_tail_every > 0 and i % long_tail_every == 0 for i in range(batch)]
    return Plan([long_tail_tokens if t else response_len for t in tail], tail)


@dataclass
class Decoded:
    """A decoded batch: `tokens` [B, prompt + W] (W the longest response; PAD after each end),
    `lengths` [B] response tokens (END included), per sample its finish reason and end time, and
    the wall time of the first decode step."""
    tokens: torch.Tensor
    lengths: torch.Tensor
    finish: list[str]
    ends: list[float]
    first_token: float


def decode(next_logits: Callable[[torch.Tensor], torch.Tensor], prompts: torch.Tensor, how: Plan,
           temperature: float = 1.0, clock: Callable[[], float] = time.time) -> Decoded:
    """Sample responses for `prompts` [B, P]: a sample stops at its first END (finish "stop") or at
    its limit (finish "length"); samples that ignore the end token never sample END. The loop stops
    when every sample has (no step is spent on a finished batch)."""
    b = prompts.shape[0]
    if len(how.limits) != b:
        raise ValueError(f"plan has {len(how.limits)} token limits for a batch of {b} prompts")
    limits = torch.tensor(how.limits)
    ignore_end = torch.tensor(how.ignore_end, dtype=torch.bool)
    done = limits <= 0
    lengths = torch.zeros(b, dtype=torch.long)
    finish, ends = [LENGTH] * b, [0.0] * b
    tokens, first = prompts, 0.0
    step = 0
    while not bool(done.all()):
        logits = next_logits(tokens).float() / temperature
        logits[ignore_end, task.END] = float("-inf")
        nxt = torch.multinomial(torch.softmax(logits, -1), 1).squeeze(1)
        nxt[done] = task.PAD
        tokens = torch.cat([tokens, nxt.unsqueeze(1)], dim=1)
        now = clock()
        first = now if step == 0 else first
        step += 1
        lengths += (~done).long()
        stopped = ~done & (nxt == task.END)
        finished = stopped | (~done & (lengths >= limits))
        for i in finished.nonzero().flatten().tolist():
            finish[i], ends[i] = (STOP if bool(stopped[i]) else LENGTH), now
        done |= finished
    return Decoded(tokens, lengths, finish, ends, first)


def sample_items(out: Decoded, how: Plan, prompt_len: int, start: float, policy_version: int) -> list[dict[str, Any]]:
    """The batch's samples as record_samples' plain dicts (docs/rollout.md): times in time.time()
    seconds; every sample of the batch started when generate() began and got its first token at the
    first decode step."""
    return [{"id": str(i), "prompt_tokens": prompt_len, "response_tokens": int(out.lengths[i]),
             "start": start, "first_token": out.first_token, "end": out.ends[i],
             "finish_reason": out.finish[i], "max_tokens": how.limits[i], "policy_version": policy_version}
            for i in range(len(out.finish))]
