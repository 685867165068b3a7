"""KL divergences between two policies: three per-token estimators, a monitor, and the exact value
(notebook 10).

With tokens o sampled from pi and r = pi_ref(o) / pi(o), three estimators of KL(pi || pi_ref)
(Schulman, "Approximating KL divergence", 2020), each one number per sampled token:

    k1 = -log r                 unbiased, high variance, can be negative
    k2 = (log r)^2 / 2          biased (exact to second order in log r), low variance, >= 0
    k3 = r - log r - 1          unbiased, low variance, >= 0 (the GRPO paper's penalty)

`approx_kl` is the monitor PPO and GRPO trainers log of how far an update moved the policy from the
one that sampled the batch: the masked mean of 0.5 * (log pi - log pi_old)^2 (k2 with pi_old sampling).
`exact_kl` is the KL itself at one position, over the whole vocabulary, from two logits tensors:
the tiny world's vocabulary is small enough to compute it at every position of a response, which
is what notebook 10 measures the estimators against.

The GRPO update of notebook 09 does not call `kl_k3`: it has its own copy of k3 in
`course_lib.grpo` (`_k3_per_token`), so that notebook 09 and its reference stand without the
functions graded here.
"""

from __future__ import annotations

import torch


def kl_k1(policy_log_probs: torch.Tensor, ref_log_probs: torch.Tensor) -> torch.Tensor:
    """Per-token k1 = -log r = log pi - log pi_ref, with r = pi_ref / pi; shapes (...) -> (...), kept.

    Unbiased for KL(pi || pi_ref) over tokens sampled from pi; takes negative values. From the
    log-probs, never through exp (exp(-110) underflows in float32), for any shape (empty too), in
    the inputs' dtype; differentiable with respect to both inputs, which are left unchanged.

    Raises:
        ValueError: the two shapes differ.
    """
    if policy_log_probs.shape != ref_log_probs.shape:
        raise ValueError(f"ref_log_probs has shape {tuple(ref_log_probs.shape)} and policy_log_probs "
                         f"{tuple(policy_log_probs.shape)}: they must have the same shape")
    return policy_log_probs - ref_log_probs


def kl_k2(policy_log_probs: torch.Tensor, ref_log_probs: torch.Tensor) -> torch.Tensor:
    """Per-token k2 = (log r)^2 / 2, with log r = log pi_ref - log pi; shapes (...) -> (...), kept.

    Biased for KL(pi || pi_ref) (its mean is exact to second order in log r), low variance, >= 0.
    From the log-probs, never through exp, for any shape (empty too), in the inputs' dtype;
    differentiable with respect to both inputs, which are left unchanged.

    Raises:
        ValueError: the two shapes differ.
    """
    if policy_log_probs.shape != ref_log_probs.shape:
        raise ValueError(f"ref_log_probs has shape {tuple(ref_log_probs.shape)} and policy_log_probs "
                         f"{tuple(policy_log_probs.shape)}: they must have the same shape")
    log_ratio = ref_log_probs - policy_log_probs
    return 0.5 * log_ratio**2


def kl_k3(policy_log_probs: torch.Tensor, ref_log_probs: torch.Tensor) -> torch.Tensor:
    """Per-token k3 = r - log r - 1, with r = pi_ref / pi; shapes (...) -> (...), kept.

    Unbiased for KL(pi || pi_ref) over tokens sampled from pi, low variance, >= 0. Computed as
    expm1(log r) - log r: near r = 1 the value is about (log r)^2 / 2, which exp(log r) - 1 - log r
    loses to the rounding of exp near 1; finite for |log r| <= 20 (float32 and float64), log r
    never clamped. For any shape (empty too), in the inputs' dtype; differentiable with respect to
    both inputs, which are left unchanged.

    Raises:
        ValueError: the two shapes differ.
    """
    if policy_log_probs.shape != ref_log_probs.shape:
        raise ValueError(f"ref_log_probs has shape {tuple(ref_log_probs.shape)} and policy_log_probs "
                         f"{tuple(policy_log_probs.shape)}: they must have the same shape")
    log_ratio = ref_log_probs - policy_log_probs
    return torch.expm1(log_ratio) - log_ratio


def approx_kl(policy_log_probs: torch.Tensor, old_log_probs: torch.Tensor, response_mask: torch.Tensor) -> torch.Tensor:
    """How far the policy moved from the sampling policy: a scalar, over the response tokens.

        approx_kl = sum(0.5 * (log pi - log pi_old)^2 * mask) / max(mask.sum(), 1)

    policy_log_probs, old_log_probs, response_mask: (...) of one shape (typically (B, T); 1-d and
    3-d too); the mask holds only 0 and 1 (bool, integer or floating). Every response token weighs
    the same, whatever its row's length (a row without response tokens adds nothing); masked-out
    positions never count (their finite values, however large); an all-zero mask gives 0. A
    0-dim tensor in the log-probs' dtype, differentiable with respect to both log-prob inputs.

    Raises:
        ValueError: shapes that differ.
        ValueError: a mask that holds anything but 0 and 1.
    """
    if old_log_probs.shape != policy_log_probs.shape:
        raise ValueError(f"old_log_probs has shape {tuple(old_log_probs.shape)} and policy_log_probs "
                         f"{tuple(policy_log_probs.shape)}: they must have the same shape")
    if response_mask.shape != policy_log_probs.shape:
        raise ValueError(f"response_mask has shape {tuple(response_mask.shape)}, the log-probs "
                         f"{tuple(policy_log_probs.shape)}: they must have the same shape")
    if not bool(((response_mask == 0) | (response_mask == 1)).all()):
        raise ValueError("response_mask must hold only 0 and 1 (1 on response tokens)")
    squared = 0.5 * (policy_log_probs - old_log_probs) ** 2
    return (squared * response_mask).sum() / response_mask.sum().clamp(min=1)


def exact_kl(policy_logits: torch.Tensor, ref_logits: torch.Tensor) -> torch.Tensor:
    """KL(pi || pi_ref) at each position, over the last (vocabulary) dim: (..., V) -> (...).

        pi = softmax(policy_logits), pi_ref = softmax(ref_logits)
        KL = sum_v pi_v * (log pi_v - log pi_ref_v)

    From log_softmax, so that logits of magnitude 1e4 stay exact in float32 (a softmax that
    underflows to 0 would give 0 * log 0 = NaN); 0 where the two logits are equal. Any leading
    shape (none, or an empty batch, too), in the logits' dtype; differentiable with respect to
    both logits, which are left unchanged.

    Raises:
        ValueError: the two shapes differ.
    """
    if policy_logits.shape != ref_logits.shape:
        raise ValueError(f"ref_logits has shape {tuple(ref_logits.shape)} and policy_logits "
                         f"{tuple(policy_logits.shape)}: they must have the same shape")
    log_pi = torch.log_softmax(policy_logits, dim=-1)
    log_ref = torch.log_softmax(ref_logits, dim=-1)
    return (log_pi.exp() * (log_pi - log_ref)).sum(dim=-1)
