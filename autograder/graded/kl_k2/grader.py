"""The grader's side of `kl_k2` (notebook 10): how its hidden cases are drawn, the correct versions
that must earn full marks and the known mistakes that must lose them, each with the sentence a
student reads (`autograder.mistakes`). Never in a student kit or the grading sandbox, which hold the
folder's __init__.py only.

Hidden cases of `kl_k2(policy_log_probs, ref_log_probs) -> (...)`: the per-token k2 estimate
(log r)^2 / 2 (r = pi_ref / pi, log r = ref_log_probs - policy_log_probs), on log ratios of either
sign, near r = 1, up to |log r| = 20, for log-probs near -110, in float32 and float64, on 1-d,
2-d, 3-d and empty shapes.

Outputs: k2 per token, the gradients of a weighted sum of it (fixed random weights) with respect
to both log-prob inputs (d k2 / d log pi_ref = log r, d k2 / d log pi = -log r), and whether the
inputs were left unchanged.

Every case draws log r first and puts both log-probs at or below 0 around it; no case has
log r = 0 everywhere (k2 and its gradient would be exactly 0 there: a scale that leaves no
tolerance).

What the cases are built to catch:

- `mixed_signs_*`, `positive_log_ratio_*`, `negative_log_ratio_*`: the 1/2 dropped, the square
  forgotten (log r / 2, whose sign also gives it away), k1 or k3 in the place of k2;
- `near_r_equal_1_float32_*` (|log r| from 1e-4 to 1e-3) and `log_ratio_pm20_float32_*`:
  (r - 1)^2 / 2, the square of the ratio's distance from 1, which agrees with (log r)^2 / 2 to
  first order only (a relative 1e-3 near r = 1, e^40 instead of 200 at log r = 20), and a clamp
  of log r;
- `log_probs_near_minus_110_float32_*`: log r from the probabilities, log(exp(ref) /
  exp(policy)), which is log(0 / 0) = NaN once exp underflows (below about -104 in float32);
- the gradients: a detached policy (or reference) log-prob, whose gradient is then missing;
- `float64_*`: float64 computed in float32 (or returned as float32);
- `no_grad_inputs_*` (`inputs_unchanged`): an in-place operation on the caller's log-probs;
- the shapes (`vector_1d_*`, `3d_*`, `T1_*`, `empty_*`, `B8_T128_*`): a reduction (a mean over
  tokens) or a reshape that loses the input's shape.
"""

from __future__ import annotations

import torch

from autograder.graded._log_ratio_cases import log_ratio_cases
from autograder.mistakes import edited, Mistake


# ---------------------------------------------------------------- the hidden cases
def make_inputs(gen: torch.Generator) -> list[tuple[str, dict]]:
    return log_ratio_cases(gen)


# ---------------------------------------------------------------- the correct versions
# the correct version 'half_the_squared_log_ratio' (autograder/graded/kl_k2/test_kl_k2.py), which the edits start from
HALF = """
        import torch
        def kl_k2(policy_log_probs, ref_log_probs):
            log_ratio = ref_log_probs - policy_log_probs
            return 0.5 * log_ratio**2
    """

RETURN = "return 0.5 * log_ratio**2"


CORRECT = {
    "half_the_squared_log_ratio": HALF,
    # the other order of the difference: squared, the sign does not matter
    "pow_over_two": """
        import torch
        def kl_k2(policy_log_probs, ref_log_probs):
            return (policy_log_probs - ref_log_probs).pow(2) / 2
    """,
    "float64_inside": """
        import torch
        def kl_k2(policy_log_probs, ref_log_probs):
            d = policy_log_probs.double() - ref_log_probs.double()
            return (d * d * 0.5).to(policy_log_probs.dtype)
    """,
    "square_mul_half": """
        import torch
        def kl_k2(policy_log_probs, ref_log_probs):
            return torch.square(ref_log_probs - policy_log_probs).mul(0.5)
    """,
}


# ---------------------------------------------------------------- the known mistakes
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
