"""The known mistakes of `kl_k1` (notebook 10): the catalogue `autograder.mistakes` describes."""

from __future__ import annotations

from autograder.mistakes import Mistake, edited


# the correct version 'difference_of_log_probs' (tests/graded/test_kl_k1.py), which the edits start from
DIFFERENCE = """
        import torch
        def kl_k1(policy_log_probs, ref_log_probs):
            return policy_log_probs - ref_log_probs
    """

RETURN = "return policy_log_probs - ref_log_probs"

MISTAKES = {
    # log r instead of -log r: every token of the wrong sign
    "sign_flipped": Mistake(
        "returns log r = log pi_ref - log pi instead of k1 = -log r = log pi - log pi_ref",
        edited(DIFFERENCE, (RETURN, "return ref_log_probs - policy_log_probs")),
        ["mixed_signs_float32_B4_T9", "positive_log_ratio_float32_3x7", "negative_log_ratio_float32_3x7"]),
    # through the probabilities: exp underflows below -104 in float32 (log(0 / 0) = NaN), and the
    # round trip through exp and log keeps only the first digits of a small log r
    "log_of_ratio_of_exps": Mistake(
        "goes through the probabilities, -log(exp(ref) / exp(pi)): exp underflows below about -104 in float32 and small log-ratios lose digits",
        edited(DIFFERENCE, (
            RETURN, "return -torch.log(torch.exp(ref_log_probs) / torch.exp(policy_log_probs))")),
        ["log_probs_near_minus_110_float32_3x6", "near_r_equal_1_float32_4x16"]),
    # "the sampling policy is fixed": no gradient reaches the policy
    "policy_detached": Mistake(
        "detaches the policy's log-probs, so no gradient reaches the policy",
        edited(DIFFERENCE, (RETURN, "return policy_log_probs.detach() - ref_log_probs")),
        ["mixed_signs_float32_B4_T9", "float64_4x6"]),
    # in place: autograd refuses it on inputs that require grad, and it changes the caller's log-probs
    "in_place_subtraction": Mistake(
        "subtracts in place, changing the caller's log-probs (and failing on inputs that require grad)",
        edited(DIFFERENCE, (RETURN, "return policy_log_probs.sub_(ref_log_probs)")),
        ["no_grad_inputs_3x5", "mixed_signs_float32_B4_T9"]),
    # the mean over the tokens: one number, not one per token
    "mean_over_tokens": Mistake(
        "averages over the tokens: the contract is one value per token",
        edited(DIFFERENCE, (RETURN, "return (policy_log_probs - ref_log_probs).mean()")),
        ["mixed_signs_float32_B4_T9", "3d_2x3x5"]),
    # float64 log-probs must give a float64 k1
    "always_float32": Mistake(
        "computes in float32 always: float64 log-probs must give a float64 k1",
        edited(DIFFERENCE, (RETURN, "return policy_log_probs.float() - ref_log_probs.float()")),
        ["float64_4x6"]),
}
