"""The grader's side of `exact_kl` (notebook 10): how its hidden cases are drawn, the correct versions
that must earn full marks and the known mistakes that must lose them, each with the sentence a
student reads (`autograder.mistakes`). Never in a student kit or the grading sandbox, which hold the
folder's __init__.py only.

Hidden cases of `exact_kl(policy_logits, ref_logits) -> (...)`: KL(pi || pi_ref) over the last
(vocabulary) dim, pi = softmax(policy_logits), pi_ref = softmax(ref_logits), for vocabularies of 2
to 200 tokens, 1-d to 4-d logits, float32 and float64, logits of magnitude 1e3 whose gaps exceed
100 (and 745), positions where the two logits are identical (KL 0), and a peaked pi against a
flat pi_ref.

Outputs: the KL per position, the gradients of a weighted sum of it (fixed random weights) with
respect to both logits (pi * (log pi - log pi_ref - KL) for the policy's, pi_ref - pi for the
reference's), and whether the logits were left unchanged.

The far-apart cases keep two policy logits within 1 of each other in each row, the rest of
both logits spread over +-3e3: with a single likely token, pi would be one-hot and the float64
truth of the policy's gradient would be rounding noise (its exact value about e^-100), a scale
that leaves no tolerance. For the same reason the identical positions share their case with
positions that differ.

The truth is a closed form (`truth`), not the reference's autograd in float64: the gradient with
respect to the policy's logits is what is left of terms of size |log pi - log pi_ref| (up to
some 1e3 where the logits are far apart) once log_softmax's backward subtracts them, and every
float64 computation of it rounds at tens of eps times its scale (the reference up to some 50,
measured against an 80-bit one) - more than the 16 eps times the scale a float64 case allows
when it is its own truth, so that a correct formula of another order (cross-entropy minus
entropy, a logsumexp by hand) failed some draws. With the closed form as the truth, the
reference's own float64 rounding is measured on each case and counted in its tolerance.

What the cases are built to catch:

- `far_apart_logits_1e3_*`: log(softmax(...)), whose softmax underflows to 0 where a logit is
  more than about 104 (float32) or 745 (float64) below the row's largest, so that
  0 * log 0 = NaN; log(softmax + eps), which puts log(eps) in the place of a log-prob of -2000;
  a softmax without the max shift (exp(1e3) = inf); log_softmax as logits - logsumexp(logits),
  whose rounding at magnitude 1e3 (a unit of 6e-5 in log pi) moves pi by a relative 6e-5, far
  beyond float32's rounding of the KL;
- `very_different_peaked_vs_flat_*` (and every other case): the direction reversed,
  KL(pi_ref || pi), which is far from KL(pi || pi_ref) when a peaked pi meets a flat pi_ref;
- `identical_positions_give_0_*`: the cross-entropy alone, -sum pi log pi_ref, without the
  entropy term (not 0 where the two distributions are equal);
- the gradients: the KL computed under no_grad or from detached logits, pi's weights in the
  expectation detached (the right value, the wrong policy gradient);
- `float32_4x7x11`, `leading_dims_*`, `vector_V29`, `T1_*`: the sum over another dim (dim 0),
  a mean over the vocabulary instead of the sum;
- `vocab_2_*`, `vocab_200_*`: the vocabulary's size;
- `float64_*`: float64 computed in float32 (or returned as float32);
- `no_grad_inputs_*` (`inputs_unchanged`): an in-place max shift of the caller's logits.
"""

from __future__ import annotations

import torch

from autograder.mistakes import edited, Mistake


# ---------------------------------------------------------------- the hidden cases
def make_inputs(gen: torch.Generator) -> list[tuple[str, dict]]:
    def randn(*shape, scale=1.0):
        return torch.randn(shape, generator=gen, dtype=torch.float64) * scale

    def case(policy, ref, dtype=torch.float32, grad=True):
        return {"policy_logits": policy.to(dtype), "ref_logits": ref.to(dtype),
                "weights": randn(*policy.shape[:-1]).to(dtype), "grad": grad}

    def far_apart(B, V, dtype):
        """Logits of magnitude 1e3: most gaps far above 100; two policy tokens within 1 per row."""
        policy, ref = randn(B, V, scale=1e3), randn(B, V, scale=1e3)
        rows = torch.arange(B)
        top = policy.argmax(-1)
        second = (top + 1 + torch.randint(0, V - 1, (B,), generator=gen)) % V
        policy[rows, second] = policy[rows, top] - torch.rand(B, generator=gen, dtype=torch.float64)
        return case(policy, ref, dtype)

    same_policy = randn(4, 3, 9, scale=2.0)
    same_ref = randn(4, 3, 9, scale=2.0)
    same_ref[0] = same_policy[0]  # a whole row of positions, and two single ones
    same_ref[2, 1] = same_policy[2, 1]
    same_ref[3, 2] = same_policy[3, 2]
    return [
        ("float32_4x7x11", case(randn(4, 7, 11, scale=2.0), randn(4, 7, 11, scale=2.0))),
        ("vocab_2_3x5x2", case(randn(3, 5, 2, scale=2.0), randn(3, 5, 2, scale=2.0))),
        ("vocab_200_2x3x200", case(randn(2, 3, 200, scale=3.0), randn(2, 3, 200, scale=3.0))),
        ("vector_V29", case(randn(29, scale=2.0), randn(29, scale=2.0))),
        ("leading_dims_2x2x3x6", case(randn(2, 2, 3, 6, scale=2.0), randn(2, 2, 3, 6, scale=2.0))),
        ("T1_3x1x50", case(randn(3, 1, 50, scale=2.0), randn(3, 1, 50, scale=2.0))),
        ("float64_3x4x13", case(randn(3, 4, 13, scale=3.0), randn(3, 4, 13, scale=3.0), dtype=torch.float64)),
        ("far_apart_logits_1e3_float32_4x50", far_apart(4, 50, torch.float32)),
        ("far_apart_logits_1e3_float64_3x40", far_apart(3, 40, torch.float64)),
        ("identical_positions_give_0_4x3x9", case(same_policy, same_ref)),
        ("very_different_peaked_vs_flat_4x20", case(randn(4, 20, scale=6.0), randn(4, 20, scale=0.3))),
        ("no_grad_inputs_3x8", case(randn(3, 8, scale=2.0), randn(3, 8, scale=2.0), grad=False)),
        ("empty_0x10", case(randn(0, 10), randn(0, 10), grad=False)),
        ("B8_T64_V100", case(randn(8, 64, 100, scale=2.0), randn(8, 64, 100, scale=2.0))),
    ]


def truth(inputs: dict) -> dict:
    """The float64 truth in closed form (see the module's docstring): the KL from log_softmax,
    its gradients pi * (log pi - log pi_ref - KL) and pi_ref - pi, times the weights."""
    lp = torch.log_softmax(inputs["policy_logits"].double(), dim=-1)
    lq = torch.log_softmax(inputs["ref_logits"].double(), dim=-1)
    p = lp.exp()
    kl = (p * (lp - lq)).sum(dim=-1)
    out = {"kl": kl, "inputs_unchanged": True}
    if inputs["grad"]:
        w = inputs["weights"].double().unsqueeze(-1)
        out["grad_policy_logits"] = w * p * (lp - lq - kl.unsqueeze(-1))
        out["grad_ref_logits"] = w * (lq.exp() - p)
    return out


# ---------------------------------------------------------------- the correct versions
# the correct version 'log_softmax_formula' (autograder/graded/exact_kl/test_exact_kl.py), which the edits start from
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


CORRECT = {
    "log_softmax_formula": FORMULA,
    # kl_div(input, target) is target * (target - input) with log_target: input log pi_ref, target log pi
    "kl_div_log_target": """
        import torch
        import torch.nn.functional as F
        def exact_kl(policy_logits, ref_logits):
            log_pi = F.log_softmax(policy_logits, dim=-1)
            log_ref = F.log_softmax(ref_logits, dim=-1)
            return F.kl_div(log_ref, log_pi, reduction="none", log_target=True).sum(-1)
    """,
    # minus the entropy plus the cross-entropy, with pi from softmax (0 where it underflows, times a finite log)
    "cross_entropy_minus_entropy": """
        import torch
        def exact_kl(policy_logits, ref_logits):
            p = torch.softmax(policy_logits, dim=-1)
            log_p = torch.log_softmax(policy_logits, dim=-1)
            log_q = torch.log_softmax(ref_logits, dim=-1)
            return (p * log_p).sum(-1) - (p * log_q).sum(-1)
    """,
    "logsumexp_by_hand_with_max_shift": """
        import torch
        def log_softmax_by_hand(z):
            shifted = z - z.max(dim=-1, keepdim=True).values
            return shifted - torch.log(torch.exp(shifted).sum(dim=-1, keepdim=True))

        def exact_kl(policy_logits, ref_logits):
            lp = log_softmax_by_hand(policy_logits)
            lq = log_softmax_by_hand(ref_logits)
            return torch.sum(torch.exp(lp) * (lp - lq), dim=-1)
    """,
    "float64_inside": """
        import torch
        def exact_kl(policy_logits, ref_logits):
            lp = torch.log_softmax(policy_logits.double(), dim=-1)
            lq = torch.log_softmax(ref_logits.double(), dim=-1)
            return (lp.exp() * (lp - lq)).sum(-1).to(policy_logits.dtype)
    """,
}


# ---------------------------------------------------------------- the known mistakes
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
