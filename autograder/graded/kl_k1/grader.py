"""The grader's side of `kl_k1` (notebook 10): how its hidden cases are drawn, the correct versions
that must earn full marks and the known mistakes that must lose them, each with the sentence a
student reads (`autograder.mistakes`). Never in a student kit or the grading sandbox, which hold the
folder's __init__.py only.

Hidden cases of `kl_k1(policy_log_probs, ref_log_probs) -> (...)`: the per-token k1 estimate
-log r = log pi - log pi_ref (r = pi_ref / pi), on log ratios of either sign, near r = 1, up to
|log r| = 20, for log-probs near -110, in float32 and float64, on 1-d, 2-d, 3-d and empty shapes.

Outputs: k1 per token, the gradients of a weighted sum of it (fixed random weights) with respect
to both log-prob inputs (the weights, and minus the weights), and whether the inputs were left
unchanged.

Every case draws log r first and puts both log-probs at or below 0 around it; no case has
log r = 0 everywhere (k1 would be exactly 0 there: a scale that leaves no tolerance).

What the cases are built to catch:

- `positive_log_ratio_*` and `negative_log_ratio_*` (and every other case): the sign flipped
  (log r in the place of -log r), which is k1 of the other direction;
- `log_probs_near_minus_110_float32_*`: -log r from the probabilities, log(exp(policy) /
  exp(ref)), which is log(0 / 0) = NaN once exp underflows (below about -104 in float32);
- `near_r_equal_1_float32_*` (|log r| from 1e-4 to 1e-3): the same round trip through exp and
  log where it does not underflow, which keeps only the first digits of a small log r;
- `log_ratio_pm20_float32_*`: a clamp of log r;
- the gradients: a detached policy (or reference) log-prob, whose gradient is then missing;
- `float64_*`: float64 computed in float32 (or returned as float32);
- `no_grad_inputs_*` (`inputs_unchanged`): an in-place subtraction on the caller's log-probs
  (on inputs that require grad, autograd refuses it: every other case fails);
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
# the correct version 'difference_of_log_probs' (autograder/graded/kl_k1/test_kl_k1.py), which the edits start from
DIFFERENCE = """
        import torch
        def kl_k1(policy_log_probs, ref_log_probs):
            return policy_log_probs - ref_log_probs
    """

RETURN = "return policy_log_probs - ref_log_probs"


CORRECT = {
    "difference_of_log_probs": DIFFERENCE,
    "minus_log_ratio": """
        import torch
        def kl_k1(policy_log_probs, ref_log_probs):
            log_ratio = ref_log_probs - policy_log_probs  # log(pi_ref / pi)
            return -log_ratio
    """,
    "float64_inside": """
        import torch
        def kl_k1(policy_log_probs, ref_log_probs):
            k1 = policy_log_probs.to(torch.float64) - ref_log_probs.to(torch.float64)
            return k1.to(policy_log_probs.dtype)
    """,
    "add_with_alpha_minus_one": """
        import torch
        def kl_k1(policy_log_probs, ref_log_probs):
            return torch.add(policy_log_probs, ref_log_probs, alpha=-1)
    """,
}


# ---------------------------------------------------------------- the known mistakes
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
