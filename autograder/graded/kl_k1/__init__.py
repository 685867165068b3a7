"""How the judge calls `kl_k1(policy_log_probs, ref_log_probs) -> (...)` on a hidden case: `call`
(fresh copies of the case's inputs in, named outputs out) and its settings. Public: a student kit
and the grading sandbox hold this file; the cases, the correct versions and the known mistakes are
grader.py's.
"""

from __future__ import annotations

import torch

GRADED = "kl_k1"


def call(fn, inputs: dict) -> dict:
    policy = inputs["policy_log_probs"].clone().requires_grad_(inputs["grad"])
    ref = inputs["ref_log_probs"].clone().requires_grad_(inputs["grad"])
    before = (policy.detach().clone(), ref.detach().clone())
    kl = fn(policy, ref)
    result = {"kl": kl, "inputs_unchanged": bool(torch.equal(policy.detach(), before[0])
                                                 and torch.equal(ref.detach(), before[1]))}
    if inputs["grad"]:
        (kl * inputs["weights"].to(kl.dtype)).sum().backward()
        result["grad_policy_log_probs"] = policy.grad
        result["grad_ref_log_probs"] = ref.grad
    return result
