"""Where the GRPO trainer's KL penalty to the reference goes, and which estimator it uses
(`GRPOConfig.kl_penalty`, with `kl_coef > 0`; notebook 10 measures what each controls).

As a loss, the penalty of a micro-batch is kl_coef times the mean over its rows of the masked
mean over response tokens of a per-token term k(log pi, log pi_ref), backpropagated through
log pi of the sampled tokens (`grpo_update.packed_grpo_train_step`). Its expected gradient on
tokens sampled from pi:

    "k3"                 k3 = r - log r - 1 (notebook 09's update)  grad KL(pi_ref || pi), the forward KL
    "k2"                 k2 = (log r)^2 / 2 (`course_lib.kl.kl_k2`)  grad KL(pi || pi_ref)
    "k3_value_k2_grad"   k3's value, k2's gradient                  grad KL(pi || pi_ref)

with r = pi_ref / pi. k2 is the graded `kl_k2` of notebook 10 itself (a student kit stubs it until
notebook 10 closes), not a copy of it; k3 is notebook 09's own copy (`course_lib.grpo`), so that
notebook 09's update stands without notebook 10's functions. "k1_reward" puts the penalty in the reward instead: each response's reward
becomes r - kl_coef * mean_t k1_t over its response tokens (k1 = log pi_old - log pi_ref of the
sampling policy, detached), before the group advantages; the policy gradient then also pushes
down log pi / pi_ref of the sampled responses, whose expectation is KL(pi || pi_ref) (per token
here: the classic RLHF penalty sums k1 over the tokens; the mean keeps it on the scale of the
loss forms above, so that one kl_coef is about one strength for all four).
"""

from __future__ import annotations

import torch

from ..grpo import _k3_per_token
from ..kl import kl_k2

KL_PENALTIES = ("k3", "k2", "k3_value_k2_grad", "k1_reward")


def _k3_value_k2_grad(policy_log_probs: torch.Tensor, ref_log_probs: torch.Tensor) -> torch.Tensor:
    k2 = kl_k2(policy_log_probs, ref_log_probs)
    return _k3_per_token(policy_log_probs, ref_log_probs).detach() + (k2 - k2.detach())


LOSS_TERMS = {"k3": _k3_per_token, "k2": kl_k2, "k3_value_k2_grad": _k3_value_k2_grad}


def loss_term(kl_penalty: str):
    """The per-token term (policy_log_probs, ref_log_probs) -> (B, T) of a penalty used as a loss;
    None for "k1_reward" (no loss term). Raises ValueError naming the setting for an unknown one."""
    if kl_penalty not in KL_PENALTIES:
        raise ValueError(f"kl_penalty {kl_penalty!r} is not one of {', '.join(KL_PENALTIES)}")
    return LOSS_TERMS.get(kl_penalty)


def update_kl_arguments(*, kl_penalty: str, kl_coef: float) -> tuple[float, dict]:
    """The update's kl_coef and its extra keywords for a penalty: k1_reward has no loss term (its
    penalty is in the rewards); a loss term other than the graded k3 is the packed update's own
    keyword `kl_term` (so that notebook 09's plain update runs the default without it)."""
    coef = 0.0 if kl_penalty == "k1_reward" else kl_coef
    return coef, ({"kl_term": loss_term(kl_penalty)} if coef > 0 and kl_penalty != "k3" else {})


def k1_shaped_rewards(raw_rewards: torch.Tensor, old_log_probs: torch.Tensor, ref_log_probs: torch.Tensor,
                      response_mask: torch.Tensor, kl_coef: float) -> tuple[torch.Tensor, torch.Tensor]:
    """("k1_reward") the rewards less kl_coef * mean_t k1 of each response, and that mean k1; (N,), (N,).

    old_log_probs, ref_log_probs, response_mask: (N, T), the sampling policy's and the reference's
    log-probs of the sampled tokens (detached)."""
    mask = response_mask.to(old_log_probs.dtype)
    k1 = ((old_log_probs - ref_log_probs) * mask).sum(-1) / mask.sum(-1).clamp(min=1)
    return raw_rewards - kl_coef * k1.to(raw_rewards.dtype), k1
