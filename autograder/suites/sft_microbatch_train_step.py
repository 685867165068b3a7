"""Hidden cases of `sft_microbatch_train_step(policy_log_probs, response_mask,
gradient_accumulation_steps, normalize_constant=1.0) -> (loss, metadata)`.

Every case runs k micro-batches whose log-probs are differentiable functions of ONE shared
parameter, so the gradient must *accumulate* in its `.grad` across the calls (on top of an
existing gradient in some cases). In the `leaf_*` cases the log-probs tensor passed in *is* that
parameter (a leaf with a gradient already in `.grad`), so a step that zeroes, overwrites or
replaces the `.grad` of its input fails. Outputs: the loss returned by each call (a 0-dim tensor
of the log-probs' dtype: a Python float fails), the parameter's gradient after each call, and
each call's `metadata["nll_per_sequence"]`.
"""

from __future__ import annotations

import torch

GRADED = "sft_microbatch_train_step"


def make_inputs(gen: torch.Generator) -> list[tuple[str, dict]]:
    def case(B, T, k, c=42.0, dtype=torch.float32, mask_kind="bool", p=0.7, empty_rows=(), all_empty=False,
             initial_grad=False, scale=1.0, minus_inf_padding=False, leaf=False):
        theta = torch.randn(B, T, generator=gen, dtype=torch.float64).to(dtype)
        micro = []
        for _ in range(k):
            mask = torch.rand(B, T, generator=gen) < p
            for r in empty_rows:
                mask[r] = False
            if all_empty:
                mask[:] = False
            mask = {"bool": mask, "float": mask.float(), "long": mask.long()}[mask_kind]
            micro.append({"scale": (torch.rand(B, T, generator=gen, dtype=torch.float64) * 2 * scale + 0.1).to(dtype),
                          "mask": mask})
        return {
            "theta": theta,
            "micro_batches": micro,
            "gradient_accumulation_steps": k,
            "normalize_constant": c,
            "initial_grad": torch.randn(B, T, generator=gen, dtype=torch.float64).to(dtype) if initial_grad else None,
            "minus_inf_padding": minus_inf_padding,
            "leaf": leaf,
        }

    return [
        ("k1_B2_T5_c1", case(2, 5, 1, c=None)),
        ("k2_B3_T6_c42", case(3, 6, 2)),
        ("k4_B4_T7_c42", case(4, 7, 4)),
        ("k3_B2_T9_c_half", case(2, 9, 3, c=0.5)),
        ("k5_B1_T4_c42", case(1, 4, 5)),
        ("k2_T1_B6", case(6, 1, 2)),
        ("k2_float_mask", case(3, 5, 2, mask_kind="float")),
        ("k2_long_mask", case(3, 5, 2, mask_kind="long")),
        ("k3_float64", case(3, 6, 3, dtype=torch.float64)),
        ("k2_empty_row", case(3, 6, 2, empty_rows=(1,))),
        ("k2_all_empty_mask", case(2, 4, 2, all_empty=True)),
        ("k3_existing_grad", case(3, 5, 3, initial_grad=True)),
        ("k2_large_log_probs", case(2, 6, 2, scale=5e3)),
        ("k2_minus_inf_on_padding", case(3, 6, 2, minus_inf_padding=True)),
        ("k4_B8_T64_c42", case(8, 64, 4, p=0.4)),
        ("leaf_k3_existing_grad", case(3, 5, 3, initial_grad=True, leaf=True)),
        ("leaf_k2_float64_existing_grad", case(2, 7, 2, dtype=torch.float64, initial_grad=True, leaf=True)),
        ("leaf_k1_no_grad_yet", case(4, 3, 1, leaf=True)),
    ]


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
