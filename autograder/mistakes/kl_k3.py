"""The known mistakes of `kl_k3` (notebook 10): the catalogue `autograder.mistakes` describes."""

from __future__ import annotations

from autograder.mistakes import Mistake, edited


# the correct version 'expm1_minus_log_ratio' (tests/graded/test_kl_k3.py), which the edits start from
EXPM1 = """
        import torch
        def kl_k3(policy_log_probs, ref_log_probs):
            log_ratio = ref_log_probs - policy_log_probs
            return torch.expm1(log_ratio) - log_ratio
    """

LOG_RATIO = "log_ratio = ref_log_probs - policy_log_probs"

RETURN = "return torch.expm1(log_ratio) - log_ratio"

MISTAKES = {
    # r = pi / pi_ref: the k3 of KL(pi_ref || pi)'s estimator, wrong on every token
    "ratio_inverted": Mistake(
        "takes r = pi / pi_ref instead of pi_ref / pi",
        edited(EXPM1, (LOG_RATIO, "log_ratio = policy_log_probs - ref_log_probs")),
        ["mixed_signs_float32_B4_T9", "log_ratio_down_to_minus_20_float32_3x8"]),
    # r - log r without the -1: every token off by one
    "minus_one_dropped": Mistake(
        "drops the -1: r - log r instead of r - log r - 1",
        edited(EXPM1, (RETURN, "return torch.exp(log_ratio) - log_ratio")),
        ["mixed_signs_float32_B4_T9", "float64_4x6"]),
    # exp(x) - 1 in float32 rounds at 6e-8 near x = 0, where k3 is about x^2 / 2
    "exp_minus_one_in_float32": Mistake(
        "computes exp(x) - 1 instead of expm1(x), which loses the small k3 near r = 1 in float32",
        edited(EXPM1, (RETURN, "return torch.exp(log_ratio) - 1 - log_ratio")),
        ["near_r_equal_1_float32_4x16"]),
    # the ratio from the probabilities: exp underflows to 0 below -104 in float32, 0 / 0 = NaN
    "ratio_as_exp_over_exp": Mistake(
        "computes the ratio as exp(ref) / exp(pi), which is 0 / 0 = NaN for log-probs below about -104 in float32",
        """
        import torch
        def kl_k3(policy_log_probs, ref_log_probs):
            r = torch.exp(ref_log_probs) / torch.exp(policy_log_probs)
            return r - torch.log(r) - 1
    """,
        ["log_probs_near_minus_110_float32_3x6", "near_r_equal_1_float32_4x16"]),
    # a clamp "against overflow" changes every token with |log r| > 10
    "log_ratio_clamped_to_10": Mistake(
        "clamps the log-ratio to [-10, 10], changing every token beyond",
        edited(EXPM1, (LOG_RATIO, "log_ratio = (ref_log_probs - policy_log_probs).clamp(-10, 10)")),
        ["log_ratio_up_to_20_float32_4x10", "log_ratio_down_to_minus_20_float32_3x8"]),
    # k2 in the place of k3: equal to second order only
    "k2_instead_of_k3": Mistake(
        "returns k2 = (log r)^2 / 2 instead of k3 = r - log r - 1",
        edited(EXPM1, (RETURN, "return 0.5 * log_ratio**2")),
        ["mixed_signs_float32_B4_T9", "positive_log_ratio_float32_3x7"]),
    # float64 log-probs must give a float64 k3
    "always_float32": Mistake(
        "computes in float32 always: float64 log-probs must give a float64 k3",
        edited(EXPM1, (LOG_RATIO, "log_ratio = (ref_log_probs - policy_log_probs).float()")),
        ["float64_4x6", "log_ratio_pm20_float64_3x8"]),
    # the mean over the tokens: one number, not one per token
    "mean_over_tokens": Mistake(
        "averages over the tokens: the contract is one value per token",
        edited(EXPM1, (RETURN, "return (torch.expm1(log_ratio) - log_ratio).mean()")),
        ["mixed_signs_float32_B4_T9", "3d_2x3x5"]),
}
