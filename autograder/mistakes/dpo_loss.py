"""The known mistakes of `dpo_loss` (notebook 12): the catalogue `autograder.mistakes` describes."""

from __future__ import annotations

from autograder.mistakes import Mistake, edited


BASE = """
    import torch
    import torch.nn.functional as F
    def dpo_loss(policy_chosen_log_probs, policy_rejected_log_probs, ref_chosen_log_probs, ref_rejected_log_probs, beta):
        tensors = [policy_chosen_log_probs, policy_rejected_log_probs, ref_chosen_log_probs, ref_rejected_log_probs]
        if any(t.dim() != 1 or t.shape != policy_chosen_log_probs.shape for t in tensors):
            raise ValueError("the four log-prob tensors must all be (B,)")
        if beta <= 0:
            raise ValueError("beta must be positive")
        ref_c, ref_r = ref_chosen_log_probs.detach(), ref_rejected_log_probs.detach()
        chosen = beta * (policy_chosen_log_probs - ref_c)
        rejected = beta * (policy_rejected_log_probs - ref_r)
        margins = chosen - rejected
        loss = -F.logsigmoid(margins).mean()
        metadata = {"chosen_rewards": chosen.detach(), "rejected_rewards": rejected.detach(),
                    "reward_margin": margins.detach().mean(), "reward_accuracy": (margins > 0).float().mean()}
        return loss, metadata
"""

LOSS = "loss = -F.logsigmoid(margins).mean()"

CHOSEN = "chosen = beta * (policy_chosen_log_probs - ref_c)"

REJECTED = "rejected = beta * (policy_rejected_log_probs - ref_r)"

RANDOM = ["random_beta_0.1_B8", "random_beta_0.5_B6", "random_beta_2_B5"]

MISTAKES = {
    # chosen and rejected swapped: the loss pushes the rejected response up
    "margin_sign_flipped": Mistake(
        "takes the margin as rejected - chosen, so the loss pushes the rejected response up",
        edited(BASE, ("margins = chosen - rejected", "margins = rejected - chosen")),
        RANDOM),
    "reference_term_dropped": Mistake(
        "leaves the reference log-probs out of the implicit rewards: beta * pi instead of beta * (pi - pi_ref)",
        edited(BASE, (CHOSEN, "chosen = beta * policy_chosen_log_probs"),
                                          (REJECTED, "rejected = beta * policy_rejected_log_probs")),
        RANDOM),
    # sigmoid(-200) is 0 in float32 (sigmoid(-1000) in float64): log 0 = -inf, an infinite loss
    "log_of_sigmoid": Mistake(
        "takes log(sigmoid(x)) instead of logsigmoid(x): sigmoid underflows to 0 for a large negative margin, an infinite loss",
        edited(BASE, (LOSS, "loss = -torch.log(torch.sigmoid(margins)).mean()")),
        ["large_negative_margin_minus_200_mixed_float32_B4", "large_negative_margin_minus_1000_float32_B3",
         "large_negative_margin_minus_1000_float64_B3"]),
    # exp(200) overflows in float32, exp(1000) in float64
    "log1p_of_exp": Mistake(
        "computes log1p(exp(-x)), which overflows for a large negative margin",
        edited(BASE, (LOSS, "loss = torch.log1p(torch.exp(-margins)).mean()")),
        ["large_negative_margin_minus_200_mixed_float32_B4", "large_negative_margin_minus_1000_float64_B3"]),
    # the two stable branches picked by torch.where: right values, but the branch not taken overflows and its
    # NaN gradient leaks through where's backward
    "where_of_two_branches_nan_gradient": Mistake(
        "picks between two stable branches with torch.where: the branch not taken overflows and its NaN gradient leaks through",
        edited(BASE, (LOSS, "loss = torch.where(margins > 0, torch.log1p(torch.exp(-margins)), "
                                                                   "-margins + torch.log1p(torch.exp(margins))).mean()")),
        ["large_negative_margin_minus_1000_float32_B3",
         "large_positive_margin_plus_1000_float64_B3"]),
    # softplus by hand, max(-x, 0) + log1p(exp(-|x|)): right values, but at a tie (x = 0, the first step)
    # clamp passes the gradient of -x while abs' is 0 there: -1 instead of -1/2, the step twice too long
    "softplus_by_hand_gradient_wrong_at_a_tie": Mistake(
        "writes softplus as max(-x, 0) + log1p(exp(-|x|)), whose gradient at a margin of exactly 0 is -1 instead of -1/2",
        edited(BASE, (LOSS, "loss = (torch.clamp(-margins, min=0) + "
                                                                         "torch.log1p(torch.exp(-margins.abs()))).mean()")),
        ["policy_equals_reference_B6", "ties_and_wins_B6"]),
    # a reference scored with gradients sends them into the frozen model's log-probs
    "reference_not_detached": Mistake(
        "leaves the reference log-probs attached, so gradients flow into the frozen model's log-probs",
        edited(BASE, ("ref_c, ref_r = ref_chosen_log_probs.detach(), ref_rejected_log_probs.detach()",
                                                 "ref_c, ref_r = ref_chosen_log_probs, ref_rejected_log_probs")),
        ["ref_requires_grad_beta_0.1_B6", "ref_requires_grad_float64_beta_0.5_B4"]),
    "accuracy_counts_ties": Mistake(
        "counts a margin of 0 as a win in reward_accuracy (>= instead of >)",
        edited(BASE, ("(margins > 0)", "(margins >= 0)")),
        ["policy_equals_reference_B6", "ties_and_wins_B6"]),
    "sum_over_the_batch": Mistake(
        "sums the loss over the batch instead of averaging it",
        edited(BASE, (LOSS, "loss = -F.logsigmoid(margins).sum()")),
        RANDOM),
    "beta_outside_the_logsigmoid": Mistake(
        "puts beta outside the logsigmoid (-beta * logsigmoid(margin / beta)) instead of inside it",
        edited(BASE, (LOSS, "loss = -beta * F.logsigmoid(margins / beta).mean()")),
        RANDOM),
    "rewards_without_beta": Mistake(
        "returns the implicit rewards without the factor beta",
        edited(BASE, ('"chosen_rewards": chosen.detach(), "rejected_rewards": rejected.detach()',
                                               '"chosen_rewards": chosen.detach() / beta, "rejected_rewards": rejected.detach() / beta')),
        RANDOM),
    "rewards_not_detached": Mistake(
        "returns the implicit rewards in metadata still attached to the graph",
        edited(BASE, ('"chosen_rewards": chosen.detach(), "rejected_rewards": rejected.detach()',
                                               '"chosen_rewards": chosen, "rejected_rewards": rejected')),
        RANDOM),
    # the policy detached as well: no gradient reaches the model
    "policy_detached": Mistake(
        "detaches the policy's log-probs too, so no gradient reaches the model",
        edited(BASE, ("margins = chosen - rejected", "margins = (chosen - rejected).detach()")),
        RANDOM,
        # it raises on every case that asks for no error (RuntimeError in backward: no graph):
        # an exception's class alone is no evidence of this mistake, so recognition cannot name it
        recognisable=False),
    "always_float32": Mistake(
        "computes the loss in float32 always: float64 log-probs must give float64",
        edited(BASE, ("margins = chosen - rejected", "margins = (chosen - rejected).float()")),
        ["float64_random_beta_0.1_B7", "ref_requires_grad_float64_beta_0.5_B4"]),
    "shapes_not_checked": Mistake(
        "accepts inputs that are not all (B,) of one length instead of raising ValueError",
        edited(BASE, ("""        if any(t.dim() != 1 or t.shape != policy_chosen_log_probs.shape for t in tensors):
            raise ValueError("the four log-prob tensors must all be (B,)")
""", "")),
        ["error_inputs_B_by_1", "error_ref_of_another_length", "error_ref_of_length_1_broadcasts"]),
    "beta_not_checked": Mistake(
        "accepts beta <= 0 instead of raising ValueError",
        edited(BASE, ("""        if beta <= 0:
            raise ValueError("beta must be positive")
""", "")),
        ["error_beta_0", "error_beta_negative"]),
}
