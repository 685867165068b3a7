"""PPO with a critic: per-token rewards, GAE, whitening, the clipped value loss, the update (notebook 11).

GRPO (notebooks 06-09) gives every token of a response the same advantage: its reward against
the group's. PPO learns a *critic* V(s_t), the expected return from position t on, and gives each
token its own advantage from the temporal-difference residuals

    delta_t = r_t + gamma * V_{t+1} - V_t,     A_t = sum_l (gamma * lam)^l * delta_{t+l}   (GAE)

with the reward of a response on its last token (`token_level_rewards`) and V = 0 after it. The
actor's loss is the clipped surrogate of notebook 07, token by token; the critic regresses V on
the returns A_t + V_t with a clipped loss of its own (`value_loss`).

Conventions: (B, T) tensors over the whole sequence (prompt, response, padding), as the rest of
the course; `response_mask` is 1 on the response tokens, one contiguous run per row.
"""

from __future__ import annotations

import torch

from .grpo import compute_grpo_clip_loss
from .masking import masked_mean


def _check_same_shape(mask: torch.Tensor, **tensors: torch.Tensor) -> None:
    for name, t in tensors.items():
        if t is not None and t.shape != mask.shape:
            raise ValueError(f"{name} has shape {tuple(t.shape)}, response_mask {tuple(mask.shape)}: "
                             f"they must have the same shape")


def token_level_rewards(scores: torch.Tensor, response_mask: torch.Tensor, kl: torch.Tensor | None = None,
                        kl_coef: float = 0.0) -> torch.Tensor:
    """(B,) scores -> (B, T) per-token rewards: each score on its row's last response token.

        r_t = score * [t = last response position] - kl_coef * kl_t * mask_t

    The last position is found from `response_mask`, never from token ids (a pad id equal to the
    eos id would move it). A row with no response token is all 0. Not differentiable in `scores`
    or `kl` by intent: rewards are data.

    Args:
        scores: (B,), row b's score for row b (never broadcast along T, also when B == T).
        response_mask: (B, T), bool or 0/1 of an int or float dtype; one contiguous run per row.
        kl: (B, T) or None; read only on response positions. kl_coef: its weight; no KL term
            when kl is None, whatever kl_coef is.
    Returns:
        (B, T) rewards in the dtype of scores promoted with kl's (float32 scores with a float64 kl
        give float64); the inputs are left unchanged.
    Raises:
        ValueError: scores not of shape (B,).
        ValueError: kl of another shape than response_mask.
    """
    if scores.dim() != 1 or scores.shape[0] != response_mask.shape[0]:
        raise ValueError(f"scores must have shape ({response_mask.shape[0]},), got {tuple(scores.shape)}")
    _check_same_shape(response_mask, kl=kl)
    mask = response_mask.bool()
    dtype = scores.dtype if kl is None else torch.promote_types(scores.dtype, kl.dtype)
    rewards = torch.zeros(mask.shape, dtype=dtype, device=scores.device)
    width = mask.shape[1]
    last = width - 1 - mask.flip(-1).long().argmax(-1)  # the last 1 of each row (0 for an empty row: masked next)
    rows = torch.arange(mask.shape[0], device=mask.device)
    rewards[rows, last] = torch.where(mask.any(-1), scores.detach().to(dtype), 0.0)
    if kl is not None:
        rewards = rewards - kl_coef * torch.where(mask, kl.detach().to(dtype), 0.0)
    return rewards


@torch.no_grad()
def compute_gae(rewards: torch.Tensor, values: torch.Tensor, response_mask: torch.Tensor, gamma: float,
                lam: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalised advantage estimation over each row's response positions; (B, T) each -> (B, T), (B, T).

        delta_t = r_t + gamma * V_{t+1} - V_t        (V = 0 after the last response token: no bootstrap)
        A_t     = delta_t + gamma * lam * A_{t+1}     returns_t = A_t + V_t

    The recursion runs backward over the positions where `response_mask` is 1; rewards and values
    elsewhere are never read, and advantages and returns are 0 there. lam = 0 gives the TD residual
    delta_t; gamma = lam = 1 the Monte Carlo return (sum of rewards to the end) minus V_t. Each row
    is its own sequence (no discount carried across rows); a row without response tokens is 0.

    The mask is bool or 0/1 of an int or float dtype, one contiguous run per row. Both outputs
    are in the dtype of rewards promoted with values' (float32 with float64 gives float64),
    without gradient; the inputs are left unchanged.

    Raises:
        ValueError: rewards or values of another shape than response_mask.
    """
    _check_same_shape(response_mask, rewards=rewards, values=values)
    mask = response_mask.bool()
    dtype = torch.promote_types(rewards.dtype, values.dtype)
    rewards, values = rewards.to(dtype), values.to(dtype)
    advantages = torch.zeros(mask.shape, dtype=dtype, device=rewards.device)
    next_value = torch.zeros(mask.shape[0], dtype=dtype, device=rewards.device)  # V after the current position
    next_advantage = torch.zeros_like(next_value)
    for t in reversed(range(mask.shape[1])):
        m = mask[:, t]
        delta = rewards[:, t] + gamma * next_value - values[:, t]
        advantage = delta + gamma * lam * next_advantage
        advantages[:, t] = torch.where(m, advantage, 0.0)
        # a position outside the response leaves the recursion's state as it found it
        next_value = torch.where(m, values[:, t], next_value)
        next_advantage = torch.where(m, advantage, next_advantage)
    returns = torch.where(mask, advantages + values, 0.0)
    return advantages, returns


def masked_whiten(values: torch.Tensor, mask: torch.Tensor, shift_mean: bool = True) -> torch.Tensor:
    """(x - mean) / sqrt(var + 1e-8) over the masked entries; any shape -> the same shape, 0 where mask is 0.

    mean and the unbiased variance (divided by n - 1) are taken over the entries where `mask` is 1
    only, over the whole tensor (not per row), with a two-pass variance (E[x^2] - E[x]^2 cancels
    in float32); shift_mean=False adds the mean back (the scale changes, the mean stays). A
    constant under the mask has variance 0: the 1e-8 keeps the result finite (no NaN). The mask
    is bool or 0/1 of an int or float dtype; the result is in the values' dtype, and the values
    are left unchanged.

    Raises:
        ValueError: values of another shape than mask.
        ValueError: fewer than two entries masked in (the unbiased variance is undefined).
    """
    _check_same_shape(mask, values=values)
    keep = mask.bool()
    n = int(keep.sum())
    if n < 2:
        raise ValueError(f"mask selects {n} entries: whitening needs at least 2 (the unbiased variance divides by n - 1)")
    mean = torch.where(keep, values, 0.0).sum() / n
    var = torch.where(keep, (values - mean) ** 2, 0.0).sum() / (n - 1)
    whitened = (values - mean) * torch.rsqrt(var + 1e-8)
    if not shift_mean:
        whitened = whitened + mean
    return torch.where(keep, whitened, 0.0)


def value_loss(values: torch.Tensor, old_values: torch.Tensor, returns: torch.Tensor, response_mask: torch.Tensor,
               cliprange_value: float) -> torch.Tensor:
    """The clipped value loss; (B, T) each -> scalar.

        loss = 0.5 * masked_mean(max((V - R)^2, (clip(V, V_old - c, V_old + c) - R)^2))

    The clip keeps an update from moving V far from the values the rollout was scored with (V_old)
    when that would lower the loss; the max makes it a pessimistic bound, as the actor's clip is.
    One mean over every response token of the batch (not a mean of per-row means); the mask is
    bool or 0/1 of an int or float dtype. A 0-dim tensor in the values' dtype, differentiable
    with respect to `values` (0 on a token whose clipped term is the larger).

    Raises:
        ValueError: values, old_values or returns of another shape than response_mask.
    """
    _check_same_shape(response_mask, values=values, old_values=old_values, returns=returns)
    # clamp V itself, not V_old + clamp(V - V_old): that sum is not exactly V in float32 when the clip is off
    clipped = torch.clamp(values, old_values - cliprange_value, old_values + cliprange_value)
    per_token = torch.maximum((values - returns) ** 2, (clipped - returns) ** 2)
    return 0.5 * masked_mean(per_token, response_mask)


def ppo_microbatch_train_step(
    policy_log_probs: torch.Tensor, values: torch.Tensor, response_mask: torch.Tensor,
    gradient_accumulation_steps: int, *, advantages: torch.Tensor, old_log_probs: torch.Tensor,
    old_values: torch.Tensor, returns: torch.Tensor, cliprange: float, cliprange_value: float, vf_coef: float,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The PPO loss of one micro-batch, backpropagated into the actor and the critic; (B, T) inputs.

        policy_loss = mean_b masked_mean_t(clip_loss_t)      (07's clip loss, one advantage per token)
        loss        = (policy_loss + vf_coef * value_loss) / gradient_accumulation_steps

    The actor's loss is aggregated as 07's micro-batch step does (per response, then over the
    batch), so that PPO and GRPO differ in the advantages alone; the value loss is `value_loss`
    (one mean over every response token). `loss.backward()` adds to the actor's and the critic's
    `.grad` (never replaces it), so k micro-batches accumulate. Returns the scaled loss that was
    backpropagated (a detached 0-dim tensor in the dtype of the log-probs and values) and
    {"policy_loss", "value_loss" (both unscaled, in that dtype too), "clip_fraction" (response
    tokens whose clipped term is the smaller), "value_clip_fraction" (response tokens whose
    clipped value term is strictly the larger): two float32 fractions, also for float64 inputs},
    all detached 0-dim tensors.

    Raises:
        ValueError: any (B, T) input of another shape than response_mask.
    """
    _check_same_shape(response_mask, policy_log_probs=policy_log_probs, values=values, advantages=advantages,
                      old_log_probs=old_log_probs, old_values=old_values, returns=returns)
    # each token as a row of one token: 07's loss with its own advantage
    per_token, meta = compute_grpo_clip_loss(advantages.reshape(-1, 1), policy_log_probs.reshape(-1, 1),
                                             old_log_probs.reshape(-1, 1), cliprange)
    policy_loss = masked_mean(per_token.reshape(response_mask.shape), response_mask, dim=-1).mean()
    v_loss = value_loss(values, old_values, returns, response_mask, cliprange_value)
    loss = (policy_loss + vf_coef * v_loss) / gradient_accumulation_steps
    loss.backward()
    clipped_v = torch.clamp(values, old_values - cliprange_value, old_values + cliprange_value)
    value_clipped = (clipped_v - returns) ** 2 > (values - returns) ** 2
    return loss.detach(), {
        "policy_loss": policy_loss.detach(), "value_loss": v_loss.detach(),
        "clip_fraction": masked_mean(meta["clipped"].reshape(response_mask.shape).float(), response_mask),
        "value_clip_fraction": masked_mean(value_clipped.detach().float(), response_mask),
    }
