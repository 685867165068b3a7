"""The known mistakes of `exact_kl` (notebook 10): the catalogue `autograder.mistakes` describes."""

from __future__ import annotations

from autograder.mistakes import Mistake, edited


# the correct version 'log_softmax_formula' (tests/graded/test_exact_kl.py), which the edits start from
FORMULA = """
        import torch
        def exact_kl(policy_logits, ref_logits):
            log_p = torch.log_softmax(policy_logits, dim=-1)
            log_q = torch.log_softmax(ref_logits, dim=-1)
            return (log_p.exp() * (log_p - log_q)).sum(dim=-1)
    """

LOG_P = "log_p = torch.log_softmax(policy_logits, dim=-1)"

LOG_Q = "log_q = torch.log_softmax(ref_logits, dim=-1)"

RETURN = "return (log_p.exp() * (log_p - log_q)).sum(dim=-1)"

MISTAKES = {
    # KL(pi_ref || pi): the other direction
    "direction_reversed": Mistake(
        "computes KL(pi_ref || pi), the other direction, instead of KL(pi || pi_ref)",
        edited(FORMULA, (RETURN, "return (log_q.exp() * (log_q - log_p)).sum(dim=-1)")),
        ["very_different_peaked_vs_flat_4x20", "float32_4x7x11"]),
    # softmax underflows to 0 for logits far below the largest: 0 * log 0 = NaN
    "log_of_softmax": Mistake(
        "takes log(softmax(x)), which is log 0 = -inf for logits far below the largest, and 0 * -inf = NaN",
        edited(FORMULA, (LOG_P, "log_p = torch.softmax(policy_logits, dim=-1).log()"),
                                  (LOG_Q, "log_q = torch.softmax(ref_logits, dim=-1).log()")),
        ["far_apart_logits_1e3_float32_4x50", "far_apart_logits_1e3_float64_3x40"]),
    # the eps hides the NaN, and puts log(1e-10) = -23 where log pi_ref is -2000
    "log_of_softmax_plus_eps": Mistake(
        "takes log(p + eps), which hides the NaN but is far off where a log-prob is much below log(eps)",
        """
        import torch
        def exact_kl(policy_logits, ref_logits):
            p = torch.softmax(policy_logits, dim=-1)
            q = torch.softmax(ref_logits, dim=-1)
            return (p * (torch.log(p + 1e-10) - torch.log(q + 1e-10))).sum(-1)
    """,
        ["far_apart_logits_1e3_float32_4x50", "far_apart_logits_1e3_float64_3x40"]),
    # no max shift: exp(1e3) = inf, inf / inf = NaN
    "softmax_by_hand_without_max_shift": Mistake(
        "computes softmax as exp(x) / sum(exp(x)) without subtracting the maximum: exp overflows to inf, inf / inf = NaN",
        """
        import torch
        def exact_kl(policy_logits, ref_logits):
            p = policy_logits.exp() / policy_logits.exp().sum(-1, keepdim=True)
            q = ref_logits.exp() / ref_logits.exp().sum(-1, keepdim=True)
            return (p * (p.log() - q.log())).sum(-1)
    """,
        ["far_apart_logits_1e3_float32_4x50", "far_apart_logits_1e3_float64_3x40"]),
    # logits - logsumexp(logits): at magnitude 1e3 the logsumexp rounds at 6e-5, which moves pi by
    # a relative 6e-5 and the KL of 3e3 by about 0.2 (rounding scale, but not the exact contract)
    "logits_minus_logsumexp": Mistake(
        "computes log-probs as logits - logsumexp(logits), which loses precision for logits of magnitude 1e3",
        edited(FORMULA,
                                          (LOG_P, "log_p = policy_logits - torch.logsumexp(policy_logits, dim=-1, keepdim=True)"),
                                          (LOG_Q, "log_q = ref_logits - torch.logsumexp(ref_logits, dim=-1, keepdim=True)")),
        ["far_apart_logits_1e3_float32_4x50"]),
    # summed over the batch dim instead of the vocabulary
    "summed_over_dim_0": Mistake(
        "sums over the first dimension instead of the vocabulary (the last)",
        edited(FORMULA, (RETURN, "return (log_p.exp() * (log_p - log_q)).sum(dim=0)")),
        ["float32_4x7x11", "leading_dims_2x2x3x6"]),
    # a mean over the vocabulary: the KL divided by V
    "mean_over_the_vocabulary": Mistake(
        "averages over the vocabulary instead of summing: the KL divided by V",
        edited(FORMULA, (RETURN, "return (log_p.exp() * (log_p - log_q)).mean(dim=-1)")),
        ["float32_4x7x11", "vocab_200_2x3x200"]),
    # the cross-entropy alone: not 0 where the distributions are equal
    "cross_entropy_without_entropy": Mistake(
        "returns the cross-entropy alone, which is not 0 where the distributions are equal",
        edited(FORMULA, (RETURN, "return -(log_p.exp() * log_q).sum(dim=-1)")),
        ["identical_positions_give_0_4x3x9", "float32_4x7x11"]),
    # "a diagnostic needs no graph": no gradient at all
    "computed_under_no_grad": Mistake(
        "computes without gradients, though the KL must be differentiable",
        edited(FORMULA, (LOG_P, "torch.set_grad_enabled(False)\n            " + LOG_P),
                                          (RETURN, "kl = (log_p.exp() * (log_p - log_q)).sum(dim=-1)\n"
                                                   "            torch.set_grad_enabled(True)\n"
                                                   "            return kl")),
        ["float32_4x7x11", "float64_3x4x13"]),
    # pi's weights taken as constants (as if the tokens were sampled): the right value, the wrong
    # gradient with respect to the policy's logits
    "expectation_weights_detached": Mistake(
        "detaches pi's weights: the right value but the wrong gradient with respect to the policy's logits",
        edited(FORMULA, (RETURN, "return (log_p.exp().detach() * (log_p - log_q)).sum(dim=-1)")),
        ["float32_4x7x11", "very_different_peaked_vs_flat_4x20"]),
    # the max shift in place: the caller's logits are shifted afterwards (and autograd refuses it
    # on logits that require grad)
    "in_place_max_shift": Mistake(
        "subtracts the maximum in place, changing the caller's logits",
        edited(FORMULA, (LOG_P, "policy_logits -= policy_logits.max(dim=-1, keepdim=True).values\n"
                                                       "            " + LOG_P)),
        ["no_grad_inputs_3x8", "float32_4x7x11"]),
    # float64 logits must give a float64 KL
    "always_float32": Mistake(
        "computes in float32 always: float64 logits must give a float64 KL",
        edited(FORMULA, (LOG_P, "log_p = torch.log_softmax(policy_logits.float(), dim=-1)"),
                                  (LOG_Q, "log_q = torch.log_softmax(ref_logits.float(), dim=-1)")),
        ["float64_3x4x13", "far_apart_logits_1e3_float64_3x40"]),
}
