"""The SFT micro-batch step: negative log-likelihood of the response tokens, accumulated."""

from __future__ import annotations

import torch

from .masking import masked_normalize


def sft_microbatch_train_step(
    policy_log_probs: torch.Tensor,
    response_mask: torch.Tensor,
    gradient_accumulation_steps: int,
    normalize_constant: float = 1.0,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Compute the SFT loss of one micro-batch and backpropagate it.

        loss = mean_b [ sum_t -log p[b, t] * mask[b, t] / normalize_constant ] / gradient_accumulation_steps

    Dividing by `gradient_accumulation_steps` makes the gradients of the micro-batches *add up*
    (in `.grad`, never overwritten) to the gradient of the mean over the whole batch.

    Args:
        policy_log_probs: (B, T) log-probs of the labels under the policy (requires grad).
        response_mask: (B, T), 1 on response tokens.
        gradient_accumulation_steps: micro-batches per optimizer step.
        normalize_constant: divisor of each sequence's summed NLL.

    Returns:
        (loss, metadata): the scaled scalar loss that was backpropagated, and
        {"nll_per_sequence": (B,) detached, "response_tokens": scalar}.
    """
    per_sequence = masked_normalize(-policy_log_probs, response_mask, dim=-1, normalize_constant=normalize_constant)
    loss = per_sequence.mean() / gradient_accumulation_steps
    loss.backward()
    return loss.detach(), {
        "nll_per_sequence": per_sequence.detach(),
        "response_tokens": response_mask.sum().detach(),
    }
