"""How the judge calls `ppo_microbatch_train_step(policy_log_probs, values, response_mask,
gradient_accumulation_steps, *, advantages, old_log_probs, old_values, returns, cliprange,
cliprange_value, vf_coef) -> (loss, metadata)` on a hidden case: `call` (fresh copies of the case's
inputs in, named outputs out) and its settings. Public: a student kit and the grading sandbox hold
this file; the cases, the correct versions and the known mistakes are grader.py's.
"""

from __future__ import annotations

import torch

GRADED = "ppo_microbatch_train_step"
# the step is graded on the student's own clip loss, value loss and masked_mean: calling the course_lib copies does not count
TRIPWIRE = ["ppo_microbatch_train_step", "value_loss", "compute_grpo_clip_loss", "masked_mean"]


def call(fn, inputs: dict) -> dict:
    theta = inputs["theta"].clone().requires_grad_()
    phi = inputs["phi"].clone().requires_grad_()
    if inputs["initial_grad_theta"] is not None:
        theta.grad = inputs["initial_grad_theta"].clone()
    if inputs["initial_grad_phi"] is not None:
        phi.grad = inputs["initial_grad_phi"].clone()
    k = inputs["gradient_accumulation_steps"]
    out = {key: [] for key in ("losses", "policy_losses", "value_losses", "clip_fractions", "value_clip_fractions",
                               "grads_theta_after_each_call", "grads_phi_after_each_call")}
    for mb in inputs["micro_batches"]:
        # log-probs below -0.5 that depend on the actor's parameter, values that depend on the critic's
        log_probs = -torch.nn.functional.softplus(mb["scale"] * theta) - 0.5
        values = mb["vscale"] * phi + 3.0
        loss, metadata = fn(log_probs, values, mb["mask"].clone(), k, advantages=mb["advantages"].clone(),
                            old_log_probs=log_probs.detach() + mb["old_shift"],
                            old_values=values.detach() + mb["value_shift"], returns=mb["returns"].clone(),
                            cliprange=inputs["cliprange"], cliprange_value=inputs["cliprange_value"],
                            vf_coef=inputs["vf_coef"])
        out["losses"].append(torch.as_tensor(loss).detach().reshape(()))
        # the metadata's losses as numbers in the case's precision, its fractions as float32 numbers
        for key, name, dtype in (("policy_losses", "policy_loss", theta.dtype), ("value_losses", "value_loss", theta.dtype),
                                 ("clip_fractions", "clip_fraction", torch.float32),
                                 ("value_clip_fractions", "value_clip_fraction", torch.float32)):
            out[key].append(torch.tensor(float(metadata[name]), dtype=dtype))
        for key, p in (("grads_theta_after_each_call", theta), ("grads_phi_after_each_call", phi)):
            out[key].append(p.grad.detach().clone() if p.grad is not None else torch.zeros_like(p.detach()))
    return out
