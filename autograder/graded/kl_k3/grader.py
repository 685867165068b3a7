"""The grader's side of `kl_k3` (notebook 10): how its hidden cases are drawn, the correct versions
that must earn full marks and the known mistakes that must lose them, each with the sentence a
student reads (`autograder.mistakes`). Never in a student kit or the grading sandbox, which hold the
folder's __init__.py only.

Hidden cases of `kl_k3(policy_log_probs, ref_log_probs) -> (...)`: the per-token k3 estimate
r - log r - 1 with r = pi_ref / pi (log r = ref_log_probs - policy_log_probs), on log ratios of
either sign, near r = 1, up to |log r| = 20, for log-probs near -110, in float32 and float64,
on 1-d, 2-d, 3-d and empty shapes.

Outputs: k3 per token, the gradients of a weighted sum of it (fixed random weights) with respect
to both log-prob inputs (d k3 / d log pi_ref = r - 1, d k3 / d log pi = 1 - r), and whether the
inputs were left unchanged.

Every case draws log r first and puts both log-probs at or below 0 around it; no case has
log r = 0 everywhere (k3 and its gradient would be exactly 0 there: a scale that leaves no
tolerance).

What the cases are built to catch:

- `near_r_equal_1_float32_*` (|log r| from 1e-4 to 1e-3): exp(log r) - 1 - log r in float32,
  which loses the value (about (log r)^2 / 2, 5e-9 to 5e-7) to the rounding of exp near 1
  (6e-8); expm1(log r) - log r, or float64 inside, keeps it;
- `log_ratio_up_to_20_*`, `log_ratio_down_to_minus_20_*`, `log_ratio_pm20_float64_*`: a clamp
  of log r (to 10, say), an overflow, and, on the negative side (values about |log r| - 1,
  which the positive side's e^20 would otherwise dwarf), the ratio inverted (pi / pi_ref);
- `log_probs_near_minus_110_float32_*`: r as exp(ref_log_probs) / exp(policy_log_probs), which
  is 0 / 0 = NaN once exp underflows (below about -104 in float32);
- `mixed_signs_*`, `positive_log_ratio_*`, `negative_log_ratio_*`: the ratio inverted, the -1
  dropped, k2 or k1 in the place of k3, a wrong sign of the gradient;
- `float64_*`: float64 computed in float32 (or returned as float32);
- `no_grad_inputs_*` (`inputs_unchanged`): an in-place operation on the caller's log-probs;
- the shapes (`vector_1d_*`, `3d_*`, `T1_*`, `empty_*`, `B8_T128_*`): a reduction (a mean over
  tokens) or a reshape that loses the input's shape.
"""

from __future__ import annotations

import torch

from autograder.graded._log_ratio_cases import common_cases, Draw
from autograder.mistakes import edited, Mistake


# ---------------------------------------------------------------- the hidden cases
def make_inputs(gen: torch.Generator) -> list[tuple[str, dict]]:

    d = Draw(gen)
    up_to_20 = d.uniform(4, 10, low=-20.0, high=20.0)
    up_to_20[0, 0], up_to_20[0, 1] = 20.0, -20.0
    up_to_20[1, :3] = d.spread(3, scale=0.01)  # small ones beside the large
    down_to_minus_20 = d.uniform(3, 8, low=-20.0, high=-5.0)
    down_to_minus_20[0, 0] = -20.0
    pm20 = d.uniform(3, 8, low=-20.0, high=20.0)
    pm20[0, 0], pm20[-1, -1] = 20.0, -20.0
    return common_cases(d) + [
        ("log_ratio_up_to_20_float32_4x10", d.case(up_to_20)),
        ("log_ratio_down_to_minus_20_float32_3x8", d.case(down_to_minus_20)),
        ("log_ratio_pm20_float64_3x8", d.case(pm20, dtype=torch.float64)),
    ]


# ---------------------------------------------------------------- the correct versions
# the correct version 'expm1_minus_log_ratio' (autograder/graded/kl_k3/test_kl_k3.py), which the edits start from
EXPM1 = """
        import torch
        def kl_k3(policy_log_probs, ref_log_probs):
            log_ratio = ref_log_probs - policy_log_probs
            return torch.expm1(log_ratio) - log_ratio
    """

LOG_RATIO = "log_ratio = ref_log_probs - policy_log_probs"

RETURN = "return torch.expm1(log_ratio) - log_ratio"


CORRECT = {
    "expm1_minus_log_ratio": EXPM1,
    # in float64 the rounding of exp near 1 (1e-16) is far below what a float32 result keeps
    "float64_inside_ratio_form": """
        import torch
        def kl_k3(policy_log_probs, ref_log_probs):
            log_r = ref_log_probs.double() - policy_log_probs.double()
            r = torch.exp(log_r)
            return (r - torch.log(r) - 1).to(policy_log_probs.dtype)
    """,
    # e^x - 1 - x = x^2/2 + x^3/6 + ... for small x: the Taylor series there, the direct formula elsewhere
    "taylor_series_near_one_with_where": """
        import torch
        def kl_k3(policy_log_probs, ref_log_probs):
            x = ref_log_probs - policy_log_probs
            series = x * x / 2 * (1 + x / 3 * (1 + x / 4 * (1 + x / 5 * (1 + x / 6))))
            direct = torch.exp(x) - 1 - x
            return torch.where(x.abs() < 1e-2, series, direct)
    """,
    # written from log pi - log pi_ref: r = exp(-d), k3 = (r - 1) + d
    "from_the_log_difference_d": """
        import torch
        def kl_k3(policy_log_probs, ref_log_probs):
            d = policy_log_probs - ref_log_probs
            return torch.special.expm1(-d) + d
    """,
}


# ---------------------------------------------------------------- the known mistakes
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
