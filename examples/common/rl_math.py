"""Pure tensor math shared by the GRPO and DPO examples (no I/O, no Ray, no profiler)."""
from __future__ import annotations

import torch
import torch.nn.functional as F


def token_log_probs(logits: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """Log-probability of each next token: logits [B, T, V] predict tokens[:, 1:] -> [B, T-1]."""
    logp = F.log_softmax(logits[:, :-1].float(), dim=-1)
    return logp.gather(-1, tokens[:, 1:].unsqueeze(-1)).squeeze(-1)


def response_mask(lengths: torch.Tensor, prompt_len: int, width: int) -> torch.Tensor:
    """[B, width] mask over token_log_probs' output (position j scores token j+1): 1.0 on each
    sample's response tokens, its first lengths[b] after the prompt (END included), 0.0 on the
    prompt and on the padding after the end."""
    k = torch.arange(width).unsqueeze(0) - (prompt_len - 1)   # the response token position j scores
    return ((k >= 0) & (k < lengths.unsqueeze(1))).float()


def sequence_log_probs(logp: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Each sequence's summed log-probability over its masked tokens (DPO's pi(y|x)): [B, T] -> [B]."""
    return torch.where(mask > 0, logp, 0.0).sum(-1)   # selected, not multiplied: padding's values never leak


def sft_loss(logp: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Supervised fine-tuning: minus the mean log-probability of the masked (response) tokens."""
    return -torch.where(mask > 0, logp, 0.0).sum() / mask.sum().clamp(min=1)


def group_advantages(rewards: torch.Tensor, group_size: int, eps: float = 1e-6) -> torch.Tensor:
    """GRPO's group-normalised advantage: (r - mean(group)) / (std(group) + eps), per sample."""
    g = rewards.view(-1, group_size)
    adv = (g - g.mean(dim=1, keepdim=True)) / (g.std(dim=1, keepdim=True, unbiased=False) + eps)
    return adv.view(-1)


def grpo_loss(logp: torch.Tensor, old_logp: torch.Tensor, ref_logp: torch.Tensor, advantages: torch.Tensor,
              mask: torch.Tensor, clip_ratio: float = 0.2, kl_coef: float = 0.01) -> tuple[torch.Tensor, dict]:
    """Clipped policy-gradient loss with a k3 KL penalty to the reference, averaged over response tokens."""
    ratio = torch.exp(logp - old_logp)
    adv = advantages.unsqueeze(-1)
    pg = -torch.minimum(ratio * adv, torch.clamp(ratio, 1 - clip_ratio, 1 + clip_ratio) * adv)
    log_r = ref_logp - logp
    kl = torch.exp(log_r) - log_r - 1  # k3 estimator, >= 0
    keep = mask > 0   # selected, not multiplied: an inf ratio on padding would make 0 * inf = nan
    per_token = pg + kl_coef * kl
    denom = mask.sum().clamp(min=1)
    loss = torch.where(keep, per_token, 0.0).sum() / denom
    with torch.no_grad():
        stats = {"pg": float(torch.where(keep, pg, 0.0).sum() / denom), "kl": float(torch.where(keep, kl, 0.0).sum() / denom)}
    return loss, stats


def dpo_loss(policy_chosen: torch.Tensor, policy_rejected: torch.Tensor, ref_chosen: torch.Tensor,
             ref_rejected: torch.Tensor, beta: float = 0.1) -> tuple[torch.Tensor, dict]:
    """DPO: -log sigmoid(beta * ((pi_c - ref_c) - (pi_r - ref_r))), inputs are summed sequence log-probs."""
    margin = (policy_chosen - ref_chosen) - (policy_rejected - ref_rejected)
    loss = -F.logsigmoid(beta * margin).mean()
    with torch.no_grad():
        stats = {"margin": float(margin.mean()), "accuracy": float((margin > 0).float().mean())}
    return loss, stats
