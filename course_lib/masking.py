"""Masked reductions: the two ways a per-token quantity becomes a per-sequence or batch number."""

from __future__ import annotations

import torch


def _masked_sum(tensor: torch.Tensor, mask: torch.Tensor, dim: int | None) -> torch.Tensor:
    # torch.where, not tensor * mask: a masked-out -inf or NaN (a padding log-prob, say) must
    # not leak into the sum as inf * 0 = NaN.
    kept = torch.where(mask.bool(), tensor, torch.zeros((), dtype=tensor.dtype, device=tensor.device))
    return kept.sum() if dim is None else kept.sum(dim=dim)


def masked_normalize(
    tensor: torch.Tensor,
    mask: torch.Tensor,
    dim: int | None = None,
    normalize_constant: float = 1.0,
) -> torch.Tensor:
    """Sum of `tensor` where `mask` is 1, divided by a fixed constant.

        masked_normalize(x, m, dim, c) = sum_dim(x * m) / c

    Args:
        tensor: any shape, e.g. (B, T) per-token losses.
        mask: same shape as `tensor` (or broadcastable), 1/True where the entry counts.
        dim: the dimension to sum over; None sums everything to a scalar.
        normalize_constant: the divisor. A constant, not the token count: this is how SFT
            avoids the per-sequence length bias of a mean (Dr. GRPO's point).

    Returns:
        `tensor` summed over `dim` (shape without `dim`), or a 0-dim tensor when dim is None.
        An all-zero mask gives 0.
    """
    return _masked_sum(tensor, mask, dim) / normalize_constant


def masked_mean(tensor: torch.Tensor, mask: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    """Mean of `tensor` over the entries where `mask` is 1.

        masked_mean(x, m, dim) = sum_dim(x * m) / sum_dim(m)

    Shapes as in `masked_normalize`. An all-zero mask along `dim` gives 0/0 = NaN, on purpose:
    a mean of nothing is undefined, and a silent 0 would hide an empty response.
    """
    count = mask.to(tensor.dtype if tensor.is_floating_point() else torch.float32)
    count = count.sum() if dim is None else count.sum(dim=dim)
    return _masked_sum(tensor, mask, dim) / count
