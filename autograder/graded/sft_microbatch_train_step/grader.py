"""The grader's side of `sft_microbatch_train_step` (notebook 04): how its hidden cases are drawn, the
correct versions that must earn full marks and the known mistakes that must lose them, each with the
sentence a student reads (`autograder.mistakes`). Never in a student kit or the grading sandbox,
which hold the folder's __init__.py only.

Hidden cases of `sft_microbatch_train_step(policy_log_probs, response_mask,
gradient_accumulation_steps, normalize_constant=1.0) -> (loss, metadata)`.

Every case runs k micro-batches whose log-probs are differentiable functions of ONE shared
parameter, so the gradient must *accumulate* in its `.grad` across the calls (on top of an
existing gradient in some cases). In the `leaf_*` cases the log-probs tensor passed in *is* that
parameter (a leaf with a gradient already in `.grad`), so a step that zeroes, overwrites or
replaces the `.grad` of its input fails. Outputs: the loss returned by each call (a 0-dim tensor
of the log-probs' dtype: a Python float fails), the parameter's gradient after each call, and
each call's `metadata["nll_per_sequence"]`.

loss = mean_b [ masked sum_t (-log p) / normalize_constant ] / gradient_accumulation_steps,
backpropagated inside (so `.grad` accumulates over the micro-batches) and returned as a tensor.
"""

from __future__ import annotations

import torch

from autograder.mistakes import edited, Mistake


# ---------------------------------------------------------------- the hidden cases
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


# ---------------------------------------------------------------- the correct versions
MICRO_BASE = """
    import torch
    def sft_microbatch_train_step(policy_log_probs, response_mask, gradient_accumulation_steps, normalize_constant=1.0):
        per_sequence = torch.where(response_mask.bool(), -policy_log_probs, 0.0).sum(dim=-1) / normalize_constant
        loss = per_sequence.mean() / gradient_accumulation_steps
        loss.backward()
        return loss.detach(), {"nll_per_sequence": per_sequence.detach()}
"""


CORRECT = {
    "torch_where_mean": MICRO_BASE,
    # the batch mean written as a sum over B * k
    "masked_fill_sum": """
        import torch
        def sft_microbatch_train_step(policy_log_probs, response_mask, gradient_accumulation_steps, normalize_constant=1.0):
            nll = -policy_log_probs.masked_fill(~response_mask.bool(), 0).sum(-1) / normalize_constant
            scaled = nll.sum() / (nll.shape[0] * gradient_accumulation_steps)
            scaled.backward()
            return scaled.detach(), {"nll_per_sequence": nll.detach(), "response_tokens": response_mask.sum()}
    """,
    # the given masked_normalize of notebook 03, as the notebook suggests
    "given_masked_normalize": """
        from course_lib.masking import masked_normalize
        def sft_microbatch_train_step(policy_log_probs, response_mask, gradient_accumulation_steps, normalize_constant=1.0):
            nll_per_sequence = masked_normalize(-policy_log_probs, response_mask, dim=-1, normalize_constant=normalize_constant)
            loss = nll_per_sequence.mean() / gradient_accumulation_steps
            loss.backward()
            metadata = {"nll_per_sequence": nll_per_sequence.detach(), "response_tokens": response_mask.sum().detach()}
            return loss.detach(), metadata
    """,
    # float64 accumulation, cast back to the log-probs' dtype before backward
    "float64_accumulation": """
        import torch
        def sft_microbatch_train_step(policy_log_probs, response_mask, gradient_accumulation_steps, normalize_constant=1.0):
            kept = torch.where(response_mask.bool(), policy_log_probs.double(), 0.0)
            per_sequence = (-kept.sum(dim=-1) / normalize_constant).to(policy_log_probs.dtype)
            loss = per_sequence.mean() / gradient_accumulation_steps
            loss.backward()
            return loss.detach(), {"nll_per_sequence": per_sequence.detach()}
    """,
    # one sequence at a time, its response tokens picked by boolean indexing
    "row_by_row_boolean_indexing": """
        import torch
        def sft_microbatch_train_step(policy_log_probs, response_mask, gradient_accumulation_steps, normalize_constant=1.0):
            rows = [-lp[m.bool()].sum() / normalize_constant for lp, m in zip(policy_log_probs, response_mask)]
            nll = torch.stack(rows)
            loss = nll.sum() / len(rows) / gradient_accumulation_steps
            loss.backward()
            return loss.detach(), {"nll_per_sequence": nll.detach()}
    """,
}

# the fresh draws of the cases the many-draws check holds every version to (tests/test_graded.py; 40 by default)
DRAWS = 12


# ---------------------------------------------------------------- the known mistakes
MISTAKES = {
    "forgot_divide_by_k": Mistake(
        "never divides the loss by gradient_accumulation_steps",
        edited(MICRO_BASE, ("per_sequence.mean() / gradient_accumulation_steps", "per_sequence.mean()")),
        ["k2_B3_T6_c42"]),
    "token_count_normaliser": Mistake(
        "divides by the number of response tokens instead of by normalize_constant",
        edited(MICRO_BASE, (".sum(dim=-1) / normalize_constant", ".sum(dim=-1) / response_mask.sum()")),
        ["k2_B3_T6_c42"]),
    "loss_returned_as_float": Mistake(
        "returns the loss as a Python float instead of a tensor",
        edited(MICRO_BASE, ("return loss.detach(),", "return loss.item(),")),
        ["k2_B3_T6_c42"]),
    # the step zeroes (or replaces) the .grad of its input: a leaf's earlier gradient is lost
    "input_grad_zeroed": Mistake(
        "zeroes the .grad of its input, so an earlier gradient on it is lost",
        edited(MICRO_BASE, (
            "        loss.backward()\n",
            "        if policy_log_probs.grad is not None:\n            policy_log_probs.grad.zero_()\n        loss.backward()\n")),
        ["leaf_k3_existing_grad"]),
    "input_grad_replaced": Mistake(
        "replaces the .grad of its input instead of adding to it",
        edited(MICRO_BASE, (
            "        loss.backward()\n",
            "        (g,) = torch.autograd.grad(loss, policy_log_probs, retain_graph=True)\n"
            "        if policy_log_probs.is_leaf:\n            policy_log_probs.grad = g\n        else:\n            loss.backward()\n")),
        ["leaf_k3_existing_grad"]),
    # 0 * (-inf) = NaN on padding
    "mask_multiplied": Mistake(
        "multiplies by the mask, so a -inf log-prob on padding gives NaN (-inf * 0)",
        edited(MICRO_BASE, ("torch.where(response_mask.bool(), -policy_log_probs, 0.0)", "(-policy_log_probs * response_mask)")),
        ["k2_minus_inf_on_padding"]),
    "no_backward": Mistake(
        "returns the loss without calling backward on it",
        edited(MICRO_BASE, ("        loss.backward()\n", "")),
        ["k2_B3_T6_c42"]),
    "unscaled_loss_returned": Mistake(
        "returns the loss before the division by gradient_accumulation_steps, not the one backpropagated",
        edited(MICRO_BASE, ("return loss.detach(),", "return (loss * gradient_accumulation_steps).detach(),")),
        ["k2_B3_T6_c42"]),
    "per_sequence_token_mean": Mistake(
        "divides each sequence's sum by its token count instead of by normalize_constant",
        edited(MICRO_BASE, (".sum(dim=-1) / normalize_constant", ".sum(dim=-1) / response_mask.sum(dim=-1).clamp(min=1)")),
        ["k2_B3_T6_c42"]),
    # a sum over the batch, not a mean: the gradient grows with the micro-batch size
    "batch_sum_not_mean": Mistake(
        "sums over the batch instead of averaging it",
        edited(MICRO_BASE, ("per_sequence.mean() / gradient_accumulation_steps", "per_sequence.sum() / gradient_accumulation_steps")),
        ["k2_B3_T6_c42"]),
    # notebook 04's visible check: "metadata['nll_per_sequence'] should be ... before / k"
    "nll_per_sequence_divided_by_k": Mistake(
        "reports metadata['nll_per_sequence'] divided by gradient_accumulation_steps, where it is the NLL before / k",
        edited(MICRO_BASE, ('{"nll_per_sequence": per_sequence.detach()}',
                            '{"nll_per_sequence": per_sequence.detach() / gradient_accumulation_steps}')),
        ["k2_B3_T6_c42", "k4_B4_T7_c42"]),
}
