"""How the judge calls `compute_grpo_clip_loss(advantages, policy_log_probs, old_log_probs, cliprange)
-> (loss, metadata)` on a hidden case: `call` (fresh copies of the case's inputs in, named outputs
out) and its settings. Public: a student kit and the grading sandbox hold this file; the cases, the
correct versions and the known mistakes are grader.py's.
"""

from __future__ import annotations

GRADED = "compute_grpo_clip_loss"


def call(fn, inputs: dict) -> dict:
    log_probs = inputs["policy_log_probs"].clone().requires_grad_()
    loss, metadata = fn(inputs["advantages"].clone(), log_probs, inputs["old_log_probs"].clone(), inputs["cliprange"])
    (loss * inputs["weights"]).sum().backward()
    return {"loss": loss, "grad_policy_log_probs": log_probs.grad, "clipped": metadata["clipped"]}
