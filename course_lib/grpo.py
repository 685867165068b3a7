"""GRPO's pieces: group-normalised advantages, the three policy-gradient losses, the train step."""

from __future__ import annotations

from typing import Callable

import torch

from .masking import masked_mean

LOSS_TYPES = ("no_baseline", "reinforce_with_baseline", "grpo_clip")


def compute_group_normalized_rewards(
    reward_fn: Callable[[str, str], dict[str, float]],
    rollout_responses: list[str],
    repeated_ground_truths: list[str],
    group_size: int,
    advantage_eps: float,
    normalize_by_std: bool,
) -> tuple[torch.Tensor, torch.Tensor, dict[str, float]]:
    """Score rollouts and turn rewards into advantages relative to their group.

    Rollouts come in consecutive groups of `group_size` answers to the same prompt. For each
    reward r_i of group G:
        A_i = r_i - mean(G)                         (normalize_by_std=False: Dr. GRPO)
        A_i = (r_i - mean(G)) / (std(G) + eps)      (normalize_by_std=True: GRPO)
    with torch's default, unbiased std. A group whose rewards are all equal carries no signal
    and gets advantage exactly 0, never NaN (also for group_size 1 and eps 0).

    Returns:
        advantages (N,), raw_rewards (N,), and metadata of batch statistics (floats).
    """
    n = len(rollout_responses)
    if len(repeated_ground_truths) != n:
        raise ValueError(f"{n} rollout responses but {len(repeated_ground_truths)} ground truths")
    if group_size < 1 or n % group_size != 0:
        raise ValueError(f"{n} rollout responses do not split into groups of group_size={group_size}")

    scores = [reward_fn(r, g) for r, g in zip(rollout_responses, repeated_ground_truths)]
    raw_rewards = torch.tensor([s["reward"] for s in scores], dtype=torch.float32)
    grouped = raw_rewards.view(-1, group_size)
    centered = grouped - grouped.mean(dim=1, keepdim=True)
    if normalize_by_std:
        std = grouped.std(dim=1, keepdim=True) if group_size > 1 else torch.zeros_like(grouped[:, :1])
        denom = std + advantage_eps
        safe = torch.where(denom > 0, denom, torch.ones_like(denom))
        advantages = torch.where(denom > 0, centered / safe, torch.zeros_like(centered))
    else:
        advantages = centered
    zero_std = (grouped.max(dim=1).values == grouped.min(dim=1).values).float()
    metadata = {
        "reward_mean": raw_rewards.mean().item(),
        "reward_std": raw_rewards.std().item() if n > 1 else 0.0,
        "reward_max": raw_rewards.max().item(),
        "reward_min": raw_rewards.min().item(),
        "format_reward": sum(s.get("format_reward", 0.0) for s in scores) / n,
        "answer_reward": sum(s.get("answer_reward", 0.0) for s in scores) / n,
        "zero_std_group_fraction": zero_std.mean().item(),
    }
    return advantages.view(-1), raw_rewards, metadata


def _as_column(x: torch.Tensor, name: str) -> torch.Tensor:
    """(B,) or (B, 1) -> (B, 1), so it broadcasts over tokens and never over the batch."""
    if x.dim() == 1:
        return x[:, None]
    if x.dim() == 2 and x.shape[1] == 1:
        return x
    raise ValueError(f"{name} must have shape (B, 1) or (B,), got {tuple(x.shape)}")


def compute_naive_policy_gradient_loss(
    raw_rewards_or_advantages: torch.Tensor,
    policy_log_probs: torch.Tensor,
) -> torch.Tensor:
    """REINFORCE's per-token loss: -A * log pi(o_t).

    Args:
        raw_rewards_or_advantages: (B, 1), one scalar per response.
        policy_log_probs: (B, T).
    Returns:
        (B, T) per-token loss; its gradient is -A * grad log pi.
    """
    return -_as_column(raw_rewards_or_advantages, "raw_rewards_or_advantages") * policy_log_probs


def compute_grpo_clip_loss(
    advantages: torch.Tensor,
    policy_log_probs: torch.Tensor,
    old_log_probs: torch.Tensor,
    cliprange: float,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """PPO/GRPO clipped surrogate, per token.

        ratio = pi(o_t) / pi_old(o_t) = exp(log pi - log pi_old)
        loss  = -min(ratio * A, clip(ratio, 1 - eps, 1 + eps) * A)

    Args:
        advantages: (B, 1); policy_log_probs, old_log_probs: (B, T); cliprange: eps.
    Returns:
        (B, T) loss, and {"clipped": (B, T) bool, True where the clipped term is strictly the
        smaller one (there the gradient is 0), "ratio": (B, T) detached}.
    """
    adv = _as_column(advantages, "advantages")
    ratio = torch.exp(policy_log_probs - old_log_probs)
    unclipped = ratio * adv
    clipped = torch.clamp(ratio, 1.0 - cliprange, 1.0 + cliprange) * adv
    loss = -torch.minimum(unclipped, clipped)
    return loss, {"clipped": (clipped < unclipped).detach(), "ratio": ratio.detach()}


def compute_policy_gradient_loss(
    policy_log_probs: torch.Tensor,
    loss_type: str,
    raw_rewards: torch.Tensor | None = None,
    advantages: torch.Tensor | None = None,
    old_log_probs: torch.Tensor | None = None,
    cliprange: float | None = None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Dispatch to the per-token loss named by `loss_type`; (B, T) loss and metadata.

    - "no_baseline": -raw_rewards * log pi           (needs raw_rewards (B, 1))
    - "reinforce_with_baseline": -advantages * log pi (needs advantages (B, 1))
    - "grpo_clip": clipped surrogate                 (needs advantages, old_log_probs, cliprange)
    """

    def need(**args):
        missing = [k for k, v in args.items() if v is None]
        if missing:
            raise ValueError(f"loss_type={loss_type!r} needs {', '.join(missing)}")

    if loss_type == "no_baseline":
        need(raw_rewards=raw_rewards)
        return compute_naive_policy_gradient_loss(raw_rewards, policy_log_probs), {}
    if loss_type == "reinforce_with_baseline":
        need(advantages=advantages)
        return compute_naive_policy_gradient_loss(advantages, policy_log_probs), {}
    if loss_type == "grpo_clip":
        need(advantages=advantages, old_log_probs=old_log_probs, cliprange=cliprange)
        return compute_grpo_clip_loss(advantages, policy_log_probs, old_log_probs, cliprange)
    raise ValueError(f"unknown loss_type {loss_type!r}; expected one of {', '.join(LOSS_TYPES)}")


def grpo_microbatch_train_step(
    policy_log_probs: torch.Tensor,
    response_mask: torch.Tensor,
    gradient_accumulation_steps: int,
    loss_type: str,
    raw_rewards: torch.Tensor | None = None,
    advantages: torch.Tensor | None = None,
    old_log_probs: torch.Tensor | None = None,
    cliprange: float | None = None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Policy-gradient loss of one micro-batch, backpropagated (gradients add up in `.grad`).

        loss = mean_b [ masked_mean_t(per_token_loss[b], mask[b]) ] / gradient_accumulation_steps

    Args: as `compute_policy_gradient_loss`, plus response_mask (B, T) and the number of
    micro-batches per optimizer step.
    Returns:
        (loss, metadata): the scaled scalar loss that was backpropagated, and the loss's
        metadata (for grpo_clip: "clipped", "ratio") plus "clip_fraction" over response tokens.
    """
    per_token, metadata = compute_policy_gradient_loss(
        policy_log_probs, loss_type, raw_rewards, advantages, old_log_probs, cliprange
    )
    loss = masked_mean(per_token, response_mask, dim=-1).mean() / gradient_accumulation_steps
    loss.backward()
    metadata = dict(metadata)
    if "clipped" in metadata:
        metadata["clip_fraction"] = masked_mean(metadata["clipped"].float(), response_mask)
    return loss.detach(), metadata
