"""How the judge calls `sft_microbatch_train_step(policy_log_probs, response_mask,
gradient_accumulation_steps, normalize_constant=1.0) -> (loss, metadata)` on a hidden case: `call`
(fresh copies of the case's inputs in, named outputs out) and its settings. Public: a student kit
and the grading sandbox hold this file; the cases, the correct versions and the known mistakes are
grader.py's.
"""

from __future__ import annotations

import torch

GRADED = "sft_microbatch_train_step"


def call(fn, inputs: dict) -> dict:
    theta = inputs["theta"].clone().requires_grad_()
    if inputs["initial_grad"] is not None:
        theta.grad = inputs["initial_grad"].clone()
    k = inputs["gradient_accumulation_steps"]
    losses, grads, nll = [], [], []
    if inputs.get("leaf"):  # the log-probs are the parameter itself: values <= 0
        theta = (-torch.nn.functional.softplus(inputs["theta"])).requires_grad_()
        if inputs["initial_grad"] is not None:
            theta.grad = inputs["initial_grad"].clone()
    for mb in inputs["micro_batches"]:
        mask = mb["mask"].clone()
        if inputs.get("leaf"):
            log_probs = theta
        else:
            # log-probs <= 0 that depend on the shared parameter: -softplus(scale * theta)
            log_probs = -torch.nn.functional.softplus(mb["scale"] * theta)
        if inputs["minus_inf_padding"]:
            log_probs = torch.where(mask.bool(), log_probs, torch.tensor(-float("inf"), dtype=log_probs.dtype))
        args = (log_probs, mask, k) if inputs["normalize_constant"] is None else (log_probs, mask, k, inputs["normalize_constant"])
        loss, metadata = fn(*args)
        losses.append(loss.detach() if isinstance(loss, torch.Tensor) else loss)  # the loss as a tensor
        grads.append(theta.grad.detach().clone() if theta.grad is not None else None)
        nll.append(metadata["nll_per_sequence"])
    return {"losses": losses, "grads_after_each_call": grads, "nll_per_sequence": nll}
