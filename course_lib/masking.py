"""Masked reductions: the two ways a per-token quantity becomes a per-sequence or batch number."""

from __future__ import annotations

import torch


def masked_normalize(
    tensor: torch.Tensor,
    mask: torch.Tensor,
    dim: int | None = None,
    normalize_constant: float = 1.0,
) -> torch.Tensor:
    """Sum of `tensor` where `mask` is 1, divided by a fixed constant.

        masked_normalize(x, m, dim, c) = sum_dim(where(m, x, 0)) / c

    Args:
        tensor: any shape, e.g. (B, T) per-token losses.
        mask: same shape as `tensor` (or broadcastable, e.g. (2, 3, 1) for (2, 3, 4)), bool or
            0/1 of an int or float dtype: 1/True where the entry counts.
        dim: the dimension to sum over; None sums everything to a scalar.
        normalize_constant: the divisor, a float or an int. A constant, not the token count, so
            that every token weighs the same whatever the length of its sequence (a per-sequence
            mean weighs the tokens of a short sequence more: the 1/|o| length bias Dr. GRPO finds
            in GRPO's loss).

    Returns:
        `tensor` summed over `dim` (shape without `dim`; a negative dim counts from the end), or
        a 0-dim tensor when dim is None, in the dtype of `tensor`, differentiable with respect to
        it. An all-zero mask gives 0. A masked-out entry never reaches the sum, even an inf or
        a NaN.
    """
    # torch.where, not tensor * mask: a masked-out -inf or NaN (a padding log-prob, say) must
    # not leak into the sum as inf * 0 = NaN.
    kept = torch.where(mask.bool(), tensor, 0.0)
    total = kept.sum() if dim is None else kept.sum(dim=dim)
    return total / normalize_constant


def masked_mean(tensor: torch.Tensor, mask: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    """Mean of `tensor` over the entries where `mask` is 1.

        masked_mean(x, m, dim) = sum_dim(where(m, x, 0)) / sum_dim(m)

    Args:
        tensor: any shape, e.g. (B, T) per-token losses.
        mask: same shape as `tensor` (or broadcastable), bool or 0/1 of an int or float dtype.
        dim: the dimension to average over; None averages everything to a scalar.

    Returns:
        `tensor` averaged over `dim` (shape without `dim`), or a 0-dim tensor when dim is None, in
        the dtype of `tensor`, differentiable with respect to it. An all-zero mask along `dim`
        gives 0/0 = NaN there, and only there, on purpose: a mean of nothing is undefined, and a
        silent 0 would hide an empty response. A masked-out entry never reaches the mean, even
        an inf or a NaN.
    """
    kept = torch.where(mask.bool(), tensor, 0.0)  # where, not *: see masked_normalize
    count = mask.to(kept.dtype)
    if dim is None:
        return kept.sum() / count.sum()
    return kept.sum(dim=dim) / count.sum(dim=dim)
