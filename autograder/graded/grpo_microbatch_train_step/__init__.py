"""How the judge calls `grpo_microbatch_train_step(policy_log_probs, response_mask,
gradient_accumulation_steps, loss_type, raw_rewards=None, advantages=None, old_log_probs=None,
cliprange=None) -> (loss, metadata)` on a hidden case: `call` (fresh copies of the case's inputs in,
named outputs out) and its settings. Public: a student kit and the grading sandbox hold this file;
the cases, the correct versions and the known mistakes are grader.py's.
"""

from __future__ import annotations

import torch

GRADED = "grpo_microbatch_train_step"
# the step is graded on the student's own loss and masked_mean: calling the course_lib copies does not count
TRIPWIRE = ["grpo_microbatch_train_step", "compute_policy_gradient_loss", "compute_naive_policy_gradient_loss",
            "compute_grpo_clip_loss", "masked_mean"]


def call(fn, inputs: dict) -> dict:
    theta = inputs["theta"].clone().requires_grad_()
    if inputs["initial_grad"] is not None:
        theta.grad = inputs["initial_grad"].clone()
    k, loss_type = inputs["gradient_accumulation_steps"], inputs["loss_type"]
    losses, grads, clip_fractions = [], [], []
    for mb in inputs["micro_batches"]:
        # log-probs <= 0 that depend on the shared parameter: -softplus(scale * theta)
        log_probs = -torch.nn.functional.softplus(mb["scale"] * theta)
        old = (log_probs.detach() + mb["old_shift"]).clamp(max=0.0)
        loss, metadata = fn(log_probs, mb["mask"].clone(), k, loss_type, raw_rewards=mb["raw_rewards"].clone(),
                            advantages=mb["advantages"].clone(), old_log_probs=old,
                            cliprange=inputs["cliprange"])
        losses.append(torch.as_tensor(loss).detach().reshape(()))
        grads.append(theta.grad.detach().clone() if theta.grad is not None else None)
        if loss_type == "grpo_clip":
            # a float32 number in every case, as the reference makes it: a share of token counts, which
            # a student may compute exactly (`.item() / .item()`) or in float32 (`clipped.float()`),
            # and which a wrong count moves by at least 1 / (B * T)
            clip_fractions.append(torch.tensor(float(metadata["clip_fraction"]), dtype=torch.float32))
    out = {"losses": losses, "grads_after_each_call": grads}
    if loss_type == "grpo_clip":
        out["clip_fractions"] = clip_fractions
    return out
