"""How the judge calls `compute_policy_gradient_loss(policy_log_probs, loss_type, raw_rewards=None,
advantages=None, old_log_probs=None, cliprange=None) -> (loss, metadata)` on a hidden case: `call`
(fresh copies of the case's inputs in, named outputs out) and its settings. Public: a student kit
and the grading sandbox hold this file; the cases, the correct versions and the known mistakes are
grader.py's.
"""

from __future__ import annotations

import torch

GRADED = "compute_policy_gradient_loss"
# the three losses are part of the same exercise: calling the course_lib copies does not count
TRIPWIRE = ["compute_policy_gradient_loss", "compute_naive_policy_gradient_loss", "compute_grpo_clip_loss"]


def call(fn, inputs: dict) -> dict:
    log_probs = inputs["policy_log_probs"].clone().requires_grad_()
    kwargs = {k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in inputs["kwargs"].items()}
    loss_type = inputs["loss_type"]
    if inputs["expect_error"]:
        try:
            fn(log_probs, loss_type, **kwargs)
        except Exception as e:  # noqa: BLE001 - which exception is the output
            return {"raises": "ValueError" if isinstance(e, ValueError) else "other"}
        return {"raises": None}
    loss, metadata = fn(log_probs, loss_type, **kwargs)
    (loss * inputs["weights"]).sum().backward()
    out = {"loss": loss, "grad_policy_log_probs": log_probs.grad}
    if loss_type == "grpo_clip":
        out["clipped"] = metadata["clipped"]
    return out
