"""How the judge calls `compute_naive_policy_gradient_loss(raw_rewards_or_advantages, policy_log_probs)
-> (B, T)` on a hidden case: `call` (fresh copies of the case's inputs in, named outputs out) and
its settings. Public: a student kit and the grading sandbox hold this file; the cases, the correct
versions and the known mistakes are grader.py's.
"""

from __future__ import annotations

GRADED = "compute_naive_policy_gradient_loss"


def call(fn, inputs: dict) -> dict:
    log_probs = inputs["log_probs"].clone().requires_grad_()
    loss = fn(inputs["a"].clone(), log_probs)
    (loss * inputs["weights"]).sum().backward()
    return {"loss": loss, "grad_log_probs": log_probs.grad}
