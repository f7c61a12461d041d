"""The example trainers' pure pieces: GRPO/DPO math and the counting task's reward."""
from __future__ import annotations

import math

import torch

from examples.common import task
from examples.common.rl_math import dpo_loss, group_advantages, grpo_loss, token_log_probs


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


def test_counting_reward():
    prompts = torch.tensor([[3, 4, 5]])
    assert float(task.reward(prompts, torch.tensor([[6, 7, 8]]))) == 1.0
    assert math.isclose(float(task.reward(prompts, torch.tensor([[6, 0, 1]]))), 2 / 3, rel_tol=1e-6)  # 0 after 6 is wrong; 1 after 0 is right
    chosen, rejected = task.preference_pairs(2, 3, 4, torch.Generator().manual_seed(0))
    assert chosen.shape == rejected.shape == (2, 7)
    assert torch.all(task.reward(chosen[:, :3], chosen[:, 3:]) == 1.0)
