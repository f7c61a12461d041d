"""The example trainers' pure pieces: GRPO/DPO math, the counting task (its end token, reward and
right answers) and the batched sampler (end token, token limits, the long-tail knob, the sample
records), on a fake next-token function: no model needed."""
from __future__ import annotations

import itertools
import math

import pytest
import torch

from examples.common import generation, task
from examples.common.rl_math import (dpo_loss, group_advantages, grpo_loss, response_mask, sequence_log_probs,
                                     token_log_probs)
from examples.common.trainer import check_generation

END = task.END


def test_token_log_probs_matches_manual():
    logits = torch.randn(2, 4, 5)
    tokens = torch.randint(0, 5, (2, 4))
    lp = token_log_probs(logits, tokens)
    manual = torch.log_softmax(logits, -1)[0, 1, tokens[0, 2]]
    assert lp.shape == (2, 3) and torch.isclose(lp[0, 1], manual)


def test_group_advantages_zero_mean_unit_std_per_group():
    r = torch.tensor([1.0, 0.0, 0.0, 1.0, 0.5, 0.5, 0.5, 0.5])
    a = group_advantages(r, 4)
    assert torch.allclose(a[:4], torch.tensor([1.0, -1.0, -1.0, 1.0]), atol=1e-4)
    assert torch.allclose(a[4:], torch.zeros(4))  # equal rewards carry no signal


def test_grpo_loss_on_policy_equals_minus_mean_advantage():
    logp = torch.randn(4, 6)
    adv = torch.tensor([1.0, -1.0, 2.0, 0.0])
    mask = torch.ones(4, 6)
    loss, stats = grpo_loss(logp, logp.clone(), logp.clone(), adv, mask, kl_coef=0.5)
    assert math.isclose(float(loss), -float(adv.mean()), rel_tol=1e-5)
    assert stats["kl"] == 0.0


def test_dpo_loss_at_zero_margin_is_log2():
    z = torch.zeros(3)
    loss, stats = dpo_loss(z, z, z, z)
    assert math.isclose(float(loss), math.log(2), rel_tol=1e-6) and stats["accuracy"] == 0.0


def test_response_mask_covers_each_response_up_to_its_end():
    # prompt 3 tokens; sequences of 3 + 4: log-prob j scores token j+1, so the response's tokens
    # 3, 4, ... are scored at j = 2, 3, ...
    m = response_mask(torch.tensor([1, 4, 2]), prompt_len=3, width=6)
    assert m.tolist() == [[0, 0, 1, 0, 0, 0], [0, 0, 1, 1, 1, 1], [0, 0, 1, 1, 0, 0]]


def test_padding_after_the_end_changes_no_loss():
    """GRPO's loss and KL and DPO's sequence log-probs use the tokens up to the end only: whatever
    the log-probs after it, the results are the same."""
    lengths, p_len = torch.tensor([2, 5]), 3
    logp, old, ref = torch.randn(2, 7), torch.randn(2, 7), torch.randn(2, 7)
    mask = response_mask(lengths, p_len, 7)
    noisy = [t + 100 * (1 - mask) * torch.randn(2, 7) for t in (logp, old, ref)]
    adv = torch.tensor([1.0, -0.5])
    (a, sa), (b, sb) = grpo_loss(logp, old, ref, adv, mask), grpo_loss(*noisy, adv, mask)
    assert torch.isclose(a, b) and sa == pytest.approx(sb)
    assert torch.allclose(sequence_log_probs(logp, mask), sequence_log_probs(noisy[0], mask))
    assert float(sequence_log_probs(logp, mask)[0]) == pytest.approx(float(logp[0, 2] + logp[0, 3]))


def test_counting_task_ends_at_the_next_blocks_end():
    # last prompt token 3, 6, 4, 7 (mod 4: 3, 2, 0, 3): count through the end of the next block, then END
    prompts = torch.tensor([[1, 2, 3], [4, 5, 6], [2, 3, 4], [5, 6, 7]])
    # END after a block's last token only once the answer has 4 tokens (response position k >= 4)
    assert task.successor(torch.tensor([[3, 7, 4, 3, 31]])).tolist() == [[4, 8, 5, 4, END]]
    right, lengths = task.answers(prompts, task.LONGEST_ANSWER)
    assert lengths.tolist() == [5, 6, 8, 5]
    assert right.tolist() == [[4, 5, 6, 7, END, END, END, END], [7, 8, 9, 10, 11, END, END, END],
                              [5, 6, 7, 8, 9, 10, 11, END], [8, 9, 10, 11, END, END, END, END]]
    assert task.reward(prompts, right, lengths).tolist() == [1.0, 1.0, 1.0, 1.0]
    junk = right.clone()
    junk[1, 6:] = 9                                        # the padding after a response's end is ignored
    assert float(task.reward(prompts[1:2], junk[1:2], lengths[1:2])) == 1.0


def test_counting_reward_partial_credit():
    prompts = torch.tensor([[1, 2, 3]])                    # the right answer: 4 5 6 7 END (5 tokens)
    r = lambda resp, n: float(task.reward(prompts, torch.tensor([resp]), torch.tensor([n])))
    assert r([4, 5, 6, END, END], 4) == pytest.approx(3 / 5)             # stopped early: END where 7 belongs
    assert r([4, 5, 6, 7, 8, 9, 10, 11, 12, 13], 10) == pytest.approx(4 / 10)   # never stops: nothing past the end
    assert r([4, 0, 1, 2, 3], 5) == pytest.approx(4 / 5)    # 0 after 4 is wrong; each later token follows its own
    assert r([END], 1) == 0.0


def test_pad_responses_to_the_widest():
    a, b = torch.tensor([[1, 2]]), torch.tensor([[3, 4, 5, 6], [7, 8, 9, 10]])
    assert task.pad_responses([a, b]).tolist() == [[1, 2, task.PAD, task.PAD], [3, 4, 5, 6], [7, 8, 9, 10]]


def fake_model(script: dict[int, list[int]]):
    """A next-token function that makes row b say script[b] token by token (a near-one-hot logit),
    then END; it counts its calls (decode steps)."""
    calls = []

    def next_logits(tokens: torch.Tensor) -> torch.Tensor:
        step = len(calls)
        calls.append(tokens.shape)
        logits = torch.full((tokens.shape[0], task.VOCAB_SIZE), -1e4)
        for b in range(tokens.shape[0]):
            seq = script.get(b, [])
            logits[b, seq[step] if step < len(seq) else END] = 0.0
        return logits
    return next_logits, calls


def test_decode_stops_each_sample_at_its_end_token_or_its_limit():
    prompts = torch.zeros(3, 2, dtype=torch.long)
    model, calls = fake_model({0: [5], 1: [1, 2, 3, 4, 5, 6], 2: [7, 8]})
    ticks = itertools.count(100)
    out = generation.decode(model, prompts, generation.plan(3, 4), clock=lambda: float(next(ticks)))
    assert len(calls) == 4                                  # the batch runs to its longest (row 1, its limit)
    assert out.lengths.tolist() == [2, 4, 3]                # END included; row 1 cut at 4 tokens
    assert out.finish == ["stop", "length", "stop"]
    assert out.tokens[:, 2:].tolist() == [[5, END, END, END], [1, 2, 3, 4], [7, 8, END, END]]
    assert out.first_token == 100.0 and out.ends == [101.0, 103.0, 102.0]   # the step that ended each


def test_long_tail_knob_runs_one_sample_in_k_past_its_end():
    how = generation.plan(16, response_len=4, long_tail_every=8, long_tail_tokens=10)
    assert [i for i, t in enumerate(how.ignore_end) if t] == [0, 8]
    assert how.limits == [10] + [4] * 7 + [10] + [4] * 7
    assert generation.plan(3, 4) == generation.Plan([4, 4, 4], [False] * 3)   # off by default
    prompts = torch.zeros(16, 2, dtype=torch.long)
    model, calls = fake_model({})                           # every sample says END at once...
    out = generation.decode(model, prompts, how)
    assert len(calls) == 10                                 # ...but two run to 10 tokens: the long tail
    assert out.lengths.tolist() == [10] + [1] * 7 + [10] + [1] * 7
    assert out.finish[0] == out.finish[8] == "length" and set(out.finish[1:8]) == {"stop"}
    assert not (out.tokens[[0, 8], 2:] == END).any()        # END never sampled by a sample that ignores it


def test_sample_items_are_record_samples_dicts():
    prompts = torch.zeros(2, 3, dtype=torch.long)
    how = generation.plan(2, 5, long_tail_every=2, long_tail_tokens=6)
    ticks = itertools.count(10)
    out = generation.decode(fake_model({1: [4]})[0], prompts, how, clock=lambda: float(next(ticks)))
    items = generation.sample_items(out, how, prompt_len=3, start=9.5, policy_version=7)
    assert items == [
        {"id": "0", "prompt_tokens": 3, "response_tokens": 6, "start": 9.5, "first_token": 10.0, "end": 15.0,
         "finish_reason": "length", "max_tokens": 6, "policy_version": 7},
        {"id": "1", "prompt_tokens": 3, "response_tokens": 2, "start": 9.5, "first_token": 10.0, "end": 11.0,
         "finish_reason": "stop", "max_tokens": 5, "policy_version": 7}]


def test_decode_rejects_a_plan_for_another_batch():
    with pytest.raises(ValueError, match="2 token limits for a batch of 3"):
        generation.decode(fake_model({})[0], torch.zeros(3, 1, dtype=torch.long), generation.plan(2, 4))


@pytest.mark.parametrize("settings, words", [
    ({"long_tail_every": -1}, ["grpo.long_tail_every=-1", "from 0 to"]),
    ({"long_tail_every": True}, ["grpo.long_tail_every=True"]),
    ({"long_tail_every": 8, "long_tail_tokens": 0}, ["grpo.long_tail_tokens=0", "from 1 to 4096"]),
    ({"long_tail_tokens": 2.5}, ["grpo.long_tail_tokens=2.5"]),
    ({"sft_steps": "20"}, ["grpo.sft_steps='20'", "from 0 to"]),
])
def test_generation_knobs_checked(settings, words):
    with pytest.raises(ValueError) as err:
        check_generation(settings, "grpo")
    assert all(w in str(err.value) for w in words), err.value


def test_generation_knobs_accepted():
    check_generation({}, "grpo")   # all off
    check_generation({"long_tail_every": 8, "long_tail_tokens": 64, "sft_steps": 20}, "dpo")
