"""KL estimators between the policy and a frozen reference policy, from per-token log-probs.

The GRPO trainer's optional KL penalty (`kl_coef > 0`) uses k3; k1 and k2 are here for the
comparison of the three (a later notebook's subject; `tests/test_trainers.py` measures them
against the exact KL of a small categorical distribution).

With samples o ~ pi and r = pi_ref(o) / pi(o), three estimators of KL(pi || pi_ref) (Schulman,
"Approximating KL divergence"):
    k1 = -log r                 unbiased, high variance, can be negative
    k2 = (log r)^2 / 2          biased, low variance
    k3 = r - log r - 1          unbiased, low variance, always >= 0 (the GRPO paper's choice)
"""

from __future__ import annotations

import torch


def kl_k3(policy_log_probs: torch.Tensor, ref_log_probs: torch.Tensor) -> torch.Tensor:
    """Per-token k3 = r - log r - 1 with r = pi_ref / pi; shapes (B, T) -> (B, T).

    Differentiable w.r.t. `policy_log_probs`; `ref_log_probs` should be detached. log r is
    clamped to [-20, 20] so that one wild token cannot overflow exp.
    """
    log_ratio = (ref_log_probs - policy_log_probs).clamp(-20.0, 20.0)
    return torch.exp(log_ratio) - log_ratio - 1.0


def kl_k1(policy_log_probs: torch.Tensor, ref_log_probs: torch.Tensor) -> torch.Tensor:
    """Per-token k1 = -log r = log pi - log pi_ref; (B, T) -> (B, T). Unbiased, can be negative."""
    return policy_log_probs - ref_log_probs


def kl_k2(policy_log_probs: torch.Tensor, ref_log_probs: torch.Tensor) -> torch.Tensor:
    """Per-token k2 = (log r)^2 / 2; (B, T) -> (B, T). Biased (exact to second order), low variance."""
    return 0.5 * (ref_log_probs - policy_log_probs) ** 2
