"""GRPO's graded pieces: group-normalised advantages (notebook 06), the three policy-gradient
losses and the micro-batch step (07), and the update of one rollout batch (09), the plain loop.
The course's GRPO trainer (`course_lib.training.grpo_trainer`) runs the same update packed
(`course_lib.training.grpo_update`: rows of weight 0 left out, the rest packed by length), which
a test holds equal to this one parameter for parameter."""

from __future__ import annotations

from typing import Callable

import torch

from .logprobs import get_response_log_probs
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

    Args:
        reward_fn: reward_fn(response, ground_truth) -> dict; the reward is its "reward" entry
            (r1_zero_reward_fn also gives "format_reward" and "answer_reward").
        rollout_responses: N = n_questions * group_size responses, the group_size answers to
            each question consecutive.
        repeated_ground_truths: N ground truths, one per response (each repeated group_size times).
        group_size: G, answers per question; N must be a multiple of it.
        advantage_eps: eps >= 0, added to the std.
        normalize_by_std: divide by (std + eps) (GRPO) or not (Dr. GRPO).

    Returns:
        advantages (N,) float32, raw_rewards (N,) float32 (the "reward" of each response, in input
        order), and metadata: batch statistics as floats (mean, std, max and min reward, format
        and answer reward, and "zero_std_group_fraction", the share of groups whose rewards are
        all equal).
    Raises:
        ValueError: a different number of responses and ground truths.
        ValueError: group_size < 1, or one that does not divide N.
    """
    n = len(rollout_responses)
    if len(repeated_ground_truths) != n:
        raise ValueError(f"{n} rollout responses but {len(repeated_ground_truths)} ground truths")
    if group_size < 1 or n % group_size != 0:
        raise ValueError(f"{n} rollout responses do not split into groups of group_size={group_size}")

    scores = [reward_fn(r, g) for r, g in zip(rollout_responses, repeated_ground_truths)]
    raw_rewards = torch.tensor([s["reward"] for s in scores], dtype=torch.float32)
    grouped = raw_rewards.view(-1, group_size)
    # a group of equal rewards is 0 exactly: the float mean of equal values need not equal them
    # (three 0.9s in float32), and a residue of 1e-8 divided by a std of 1e-8 is not small
    constant = grouped.max(dim=1, keepdim=True).values == grouped.min(dim=1, keepdim=True).values
    centered = torch.where(constant, torch.zeros_like(grouped), grouped - grouped.mean(dim=1, keepdim=True))
    if normalize_by_std:
        std = grouped.std(dim=1, keepdim=True) if group_size > 1 else torch.zeros_like(grouped[:, :1])
        denom = std + advantage_eps
        safe = torch.where(denom > 0, denom, torch.ones_like(denom))
        advantages = torch.where(denom > 0, centered / safe, torch.zeros_like(centered))
    else:
        advantages = centered
    zero_std = constant.float().view(-1)
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
        raw_rewards_or_advantages: (B, 1), one scalar per response (a (B,) tensor is read as (B, 1),
            never broadcast along T, also when B == T).
        policy_log_probs: (B, T).
    Returns:
        (B, T) per-token loss in the inputs' dtype; its gradient with respect to policy_log_probs
        is -A.
    Raises:
        ValueError: raw_rewards_or_advantages of a shape other than (B, 1) or (B,).
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

    The ratio is the exp of the difference (exp(log pi) / exp(log pi_old) is 0 / 0 for log-probs
    near -100 in float32); A may be positive, negative or 0.

    Args:
        advantages: (B, 1) (a (B,) tensor is read as (B, 1), never broadcast along T, also when
            B == T); policy_log_probs, old_log_probs: (B, T); cliprange: eps.
    Returns:
        (B, T) loss in the inputs' dtype, differentiable with respect to policy_log_probs, and
        {"clipped": (B, T) bool, True where the clipped term is strictly the smaller one (there
        the gradient is 0; for A > 0 a ratio below 1 - eps is not clipped, for A < 0 one above
        1 + eps is not), "ratio": (B, T) detached}.
    Raises:
        ValueError: advantages of a shape other than (B, 1) or (B,).
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

    Arguments the loss does not need are ignored (they may be None or given). The loss is (B, T)
    in the inputs' dtype; metadata: {} for the first two, the clip loss's for "grpo_clip" (its
    "clipped" a (B, T) bool tensor).

    Raises:
        ValueError: any other loss_type (names are case-sensitive: "GRPO_clip" is unknown).
        ValueError: an argument the loss needs is None (never a TypeError from None * tensor).
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

    Each sequence's mean over its own response tokens first, then the mean over sequences (not
    one mean over all the micro-batch's tokens). `loss.backward()` adds to `.grad` (never zeroes
    or overwrites it), so the gradients of the k micro-batches accumulate.

    Args: as `compute_policy_gradient_loss`, plus response_mask (B, T) (bool or 0/1 of an int
    or float dtype) and the number of micro-batches per optimizer step.
    Returns:
        (loss, metadata): the scaled scalar loss that was backpropagated (a detached 0-dim
        tensor in the inputs' dtype), and the loss's metadata (for grpo_clip: "clipped",
        "ratio") plus, for grpo_clip, "clip_fraction": the fraction of response tokens (mask 1)
        whose clipped term is the smaller one (a 0-dim float32 tensor, also for float64 inputs).
    Raises:
        ValueError: an unknown loss_type, or one without an argument it needs (as
            `compute_policy_gradient_loss`).
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


def slice_micro_batch(rollout_batch: dict[str, torch.Tensor], rows: slice | torch.Tensor) -> dict[str, torch.Tensor]:
    """Rows `rows` (a slice or a tensor of row indices) of a rollout batch, cut after the last
    response token of those rows.

    The columns cut hold only padding and prompt tokens after every response token of these
    rows: with a causal model and right padding they change no log-prob that the loss reads,
    and they would cost a forward and backward pass each.
    """
    mask = rollout_batch["response_mask"][rows]
    used = mask.any(dim=0).nonzero()
    width = int(used.max()) + 1 if len(used) else mask.shape[1]
    out = {}
    for key, value in rollout_batch.items():
        value = value[rows]
        out[key] = value[:, None] if value.dim() == 1 else value[:, :width]  # (B,) -> (B, 1): one per sequence
    return out


def _k3_per_token(policy_log_probs: torch.Tensor, ref_log_probs: torch.Tensor) -> torch.Tensor:
    """The KL penalty of one token, r - log r - 1 with r = pi_ref / pi (the k3 estimate); (B, T) -> (B, T).

    Notebook 09's own copy, given there (notebook 10 has you write the KL estimators of
    `course_lib.kl`; this one keeps notebook 09 and its reference standing without them). log r
    is clamped to [-20, 20] so that one wild token cannot overflow exp.
    """
    log_r = torch.clamp(ref_log_probs - policy_log_probs, min=-20.0, max=20.0)
    return log_r.exp() - log_r - 1.0


def _check_rollout_batch(n: int, train_batch_size: int, k: int, kl_coef: float, rollout_batch: dict) -> None:
    if train_batch_size % k or n % train_batch_size:
        raise ValueError(f"{n} rollouts do not split into train batches of {train_batch_size} "
                         f"and micro-batches of {train_batch_size} / {k}")
    if kl_coef > 0 and "ref_log_probs" not in rollout_batch:
        raise ValueError("kl_coef > 0 needs rollout_batch['ref_log_probs']")


def grpo_train_step(
    policy: torch.nn.Module, optimizer: torch.optim.Optimizer, rollout_batch: dict[str, torch.Tensor],
    loss_type: str, train_batch_size: int, gradient_accumulation_steps: int, epochs_per_rollout_batch: int = 1,
    cliprange: float | None = None, max_grad_norm: float = 1.0, kl_coef: float = 0.0, scheduler=None,
    log_probs_fn=get_response_log_probs, train_step_fn=grpo_microbatch_train_step,
) -> dict[str, list[float]]:
    """All the policy updates of one rollout batch: epochs x optimizer steps x micro-batches.

        k = gradient_accumulation_steps; micro = train_batch_size // k
        for epoch in 1 .. epochs_per_rollout_batch:                  # 1: on-policy
            for each train batch (train_batch_size consecutive rows):    # one optimizer step
                for each of its k micro-batches mb (micro consecutive rows, `slice_micro_batch`):
                    log_probs = log_probs_fn(policy, input_ids, labels, return_token_entropy=True)  # (micro, T')
                    if kl_coef > 0: backward(the KL term of mb, below; retain_graph=True)
                    train_step_fn(log_probs, mask, k, loss_type, raw_rewards, advantages,
                                  old_log_probs, cliprange)             # its loss / k, backward inside
                grad_norm = clip_grad_norm_(max_grad_norm); optimizer.step(); scheduler.step(); zero grads

    The KL term of a micro-batch M is
        kl_coef * mean_{b in M} masked_mean_t(_k3_per_token(log_probs, ref_log_probs)) / k:
    the raw k3 of each token, its mean over each sequence's response tokens, the mean over M's rows,
    weighted by kl_coef and divided by k like the policy-gradient loss (each row weighs 1 / train_batch_size).

    Args:
        policy: the model being trained, scoring at the sampling temperature (the trainer passes
            `TemperatureScaled(model, T)`), so that log-probs describe the samples.
        rollout_batch: the N rollouts in group order: "input_ids", "labels", "response_mask" (N, T);
            "raw_rewards", "advantages" (N,); "old_log_probs" (grpo_clip), "ref_log_probs" (KL) (N, T).
            A micro-batch's tensors are (micro, T') and (micro, 1), T' <= T (`slice_micro_batch`).
        loss_type, cliprange: as in `grpo_microbatch_train_step`; kl_coef: k3 KL weight (0: none).
        train_batch_size: rollouts per optimizer step; N a multiple of it, it a multiple of k.
        scheduler: stepped after each optimizer step; log_probs_fn, train_step_fn: notebooks 03, 07.

    Returns:
        {"loss": [per optimizer step: the sum of its micro-batch losses, KL terms included],
         "grad_norm": [per optimizer step: the norm before clipping],
         "token_entropy": [per micro-batch: mean entropy of its response tokens],
         "clip_fraction": [per micro-batch, grpo_clip only], "kl": [per micro-batch: its mean k3, kl_coef > 0 only]},
        every entry a Python float whatever the model's dtype.
    Raises:
        ValueError: N not a multiple of train_batch_size, or train_batch_size not one of k.
        ValueError: kl_coef > 0 without rollout_batch["ref_log_probs"].
    """
    n, k = len(rollout_batch["advantages"]), gradient_accumulation_steps
    _check_rollout_batch(n, train_batch_size, k, kl_coef, rollout_batch)
    micro = train_batch_size // k
    out: dict[str, list[float]] = {"loss": [], "grad_norm": [], "token_entropy": [], "clip_fraction": [], "kl": []}
    for _epoch in range(epochs_per_rollout_batch):
        for first in range(0, n, train_batch_size):  # one optimizer step per train batch
            step_loss = 0.0
            for start in range(first, first + train_batch_size, micro):  # its k micro-batches
                mb = slice_micro_batch(rollout_batch, slice(start, start + micro))
                scored = log_probs_fn(policy, mb["input_ids"], mb["labels"], return_token_entropy=True)
                log_probs, mask = scored["log_probs"], mb["response_mask"]
                if scored.get("token_entropy") is not None:
                    out["token_entropy"].append(float(masked_mean(scored["token_entropy"], mask)))
                if kl_coef > 0:  # the penalty, scaled like the policy-gradient loss
                    kl = masked_mean(_k3_per_token(log_probs, mb["ref_log_probs"]), mask, dim=-1).mean()
                    kl_term = kl_coef * kl / k
                    kl_term.backward(retain_graph=True)  # the policy-gradient loss backprops through log_probs next
                    out["kl"].append(float(kl.detach()))
                    step_loss += float(kl_term.detach())
                loss, meta = train_step_fn(log_probs, mask, k, loss_type, raw_rewards=mb["raw_rewards"],
                                           advantages=mb["advantages"], old_log_probs=mb.get("old_log_probs"),
                                           cliprange=cliprange)
                step_loss += float(loss)
                if "clip_fraction" in meta:
                    out["clip_fraction"].append(float(meta["clip_fraction"]))
            # the whole step's gradient is in .grad: clip it, step, then zero it for the next step
            out["grad_norm"].append(float(torch.nn.utils.clip_grad_norm_(policy.parameters(), max_grad_norm)))
            optimizer.step()
            if scheduler is not None:
                scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            out["loss"].append(step_loss)
    return out
