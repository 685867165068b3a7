"""How the judge calls `approx_kl(policy_log_probs, old_log_probs, response_mask) -> ()` on a hidden
case: `call` (fresh copies of the case's inputs in, named outputs out) and its settings. Public: a
student kit and the grading sandbox hold this file; the cases, the correct versions and the known
mistakes are grader.py's.
"""

from __future__ import annotations

GRADED = "approx_kl"


def call(fn, inputs: dict) -> dict:
    policy = inputs["policy_log_probs"].clone().requires_grad_(inputs["grad"])
    old = inputs["old_log_probs"].clone().requires_grad_(inputs["grad"])
    kl = fn(policy, old, inputs["response_mask"].clone())
    result = {"approx_kl": kl}
    if inputs["grad"]:
        kl.backward()
        result["grad_policy_log_probs"] = policy.grad
        result["grad_old_log_probs"] = old.grad
    return result
