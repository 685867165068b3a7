"""The known mistakes of `kl_k2` (notebook 10): the catalogue `autograder.mistakes` describes."""

from __future__ import annotations

from autograder.mistakes import Mistake, edited


# the correct version 'half_the_squared_log_ratio' (tests/graded/test_kl_k2.py), which the edits start from
HALF = """
        import torch
        def kl_k2(policy_log_probs, ref_log_probs):
            log_ratio = ref_log_probs - policy_log_probs
            return 0.5 * log_ratio**2
    """

RETURN = "return 0.5 * log_ratio**2"

MISTAKES = {
    # (log r)^2: twice k2
    "half_dropped": Mistake(
        "drops the 1/2: (log r)^2 instead of (log r)^2 / 2",
        edited(HALF, (RETURN, "return log_ratio**2")),
        ["mixed_signs_float32_B4_T9", "positive_log_ratio_float32_3x7", "negative_log_ratio_float32_3x7"]),
    # the square of the ratio's distance from 1: equal to first order only (e^40 / 2 at log r = 20)
    "ratio_minus_one_squared": Mistake(
        "squares the ratio's distance from 1, (r - 1)^2 / 2, instead of (log r)^2 / 2",
        edited(HALF, (RETURN, "return 0.5 * (torch.exp(log_ratio) - 1) ** 2")),
        ["near_r_equal_1_float32_4x16", "log_ratio_pm20_float32_4x10",
         "positive_log_ratio_float32_3x7"]),
    # the square forgotten: log r / 2, negative wherever pi_ref < pi
    "square_forgotten": Mistake(
        "forgets the square: log r / 2 instead of (log r)^2 / 2",
        edited(HALF, (RETURN, "return 0.5 * log_ratio")),
        ["negative_log_ratio_float32_3x7", "mixed_signs_float32_B4_T9"]),
    # through the probabilities: exp underflows below -104 in float32, log(0 / 0) = NaN
    "log_of_ratio_of_exps": Mistake(
        "goes through the probabilities, log(exp(ref) / exp(pi)): exp underflows below about -104 in float32",
        edited(HALF, ("log_ratio = ref_log_probs - policy_log_probs",
                                               "log_ratio = torch.log(torch.exp(ref_log_probs) / torch.exp(policy_log_probs))")),
        ["log_probs_near_minus_110_float32_3x6"]),
    # float64 log-probs must give a float64 k2
    "always_float32": Mistake(
        "computes in float32 always: float64 log-probs must give a float64 k2",
        edited(HALF, ("log_ratio = ref_log_probs - policy_log_probs",
                                         "log_ratio = (ref_log_probs - policy_log_probs).float()")),
        ["float64_4x6"]),
    # the reference log-probs detached "because the reference model is frozen": the contract is
    # differentiable with respect to both inputs
    "ref_detached": Mistake(
        "detaches the reference log-probs, though the contract is differentiable with respect to both inputs",
        edited(HALF, ("log_ratio = ref_log_probs - policy_log_probs",
                                       "log_ratio = ref_log_probs.detach() - policy_log_probs")),
        ["mixed_signs_float32_B4_T9"]),
}
