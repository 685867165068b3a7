"""The known mistakes of `sft_microbatch_train_step` (notebook 04): the catalogue `autograder.mistakes` describes."""

from __future__ import annotations

from autograder.mistakes import Mistake, edited


MICRO_BASE = """
    import torch
    def sft_microbatch_train_step(policy_log_probs, response_mask, gradient_accumulation_steps, normalize_constant=1.0):
        per_sequence = torch.where(response_mask.bool(), -policy_log_probs, 0.0).sum(dim=-1) / normalize_constant
        loss = per_sequence.mean() / gradient_accumulation_steps
        loss.backward()
        return loss.detach(), {"nll_per_sequence": per_sequence.detach()}
"""

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
