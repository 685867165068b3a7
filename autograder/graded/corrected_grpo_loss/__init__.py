"""How the judge calls `corrected_grpo_loss(advantages, policy_log_probs, old_log_probs,
rollout_log_probs, response_mask, cliprange, mode, cap, aggregate="sum") -> (loss, metadata)` on a
hidden case: `call` (fresh copies of the case's inputs in, named outputs out) and its settings.
Public: a student kit and the grading sandbox hold this file; the cases, the correct versions and
the known mistakes are grader.py's.
"""

from __future__ import annotations

GRADED = "corrected_grpo_loss"


def call(fn, inputs: dict) -> dict:
    policy = inputs["policy_log_probs"].clone().requires_grad_()
    rollout = inputs["rollout_log_probs"].clone().requires_grad_()
    loss, metadata = fn(inputs["advantages"].clone(), policy, inputs["old_log_probs"].clone(), rollout,
                        inputs["response_mask"].clone(), inputs["cliprange"], inputs["mode"], inputs["cap"],
                        aggregate=inputs["aggregate"])
    loss.backward()
    return {"loss": loss, "grad_policy_log_probs": policy.grad,
            "weights": metadata["weights"], "kept_fraction": metadata["kept_fraction"],
            "clip_fraction": metadata["clip_fraction"],
            "rollout_gets_no_gradient": rollout.grad is None or not bool(rollout.grad.any())}
