"""The grader's side of `compute_grpo_clip_loss` (notebook 07): how its hidden cases are drawn, the
correct versions that must earn full marks and the known mistakes that must lose them, each with the
sentence a student reads (`autograder.mistakes`). Never in a student kit or the grading sandbox,
which hold the folder's __init__.py only.

Hidden cases of `compute_grpo_clip_loss(advantages, policy_log_probs, old_log_probs, cliprange)
-> (loss, metadata)`.

Outputs: the (B, T) per-token loss, the gradient of a weighted sum of it with respect to the
policy log-probs (zero exactly where the clipped term is the smaller one), and
`metadata["clipped"]`, the (B, T) bool tensor that is True where the clipped term is strictly the
smaller one.

What the cases are built to catch: a flipped sign, the clamp put on the advantage instead of
the ratio, max instead of min, the ratio inverted (old / new), a ratio computed as
exp(new) / exp(old) (0 / 0 = NaN for log-probs near -100 in float32), a clip mask that marks
every ratio outside [1 - eps, 1 + eps] whatever the sign of A (for A > 0 a small ratio is not
clipped), advantages of both signs and zero, several clip ranges, the on-policy case
(ratio 1), a (B,) advantage on a square batch, float64.
"""

from __future__ import annotations

import torch

from autograder.mistakes import edited, Mistake


# ---------------------------------------------------------------- the hidden cases
def make_inputs(gen: torch.Generator) -> list[tuple[str, dict]]:
    def case(B, T, cliprange=0.2, spread=0.5, adv="mixed", dtype=torch.float32, column=True, on_policy=False,
             level=3.0, offset=0.0):
        old = -torch.rand(B, T, generator=gen, dtype=torch.float64) * level - offset
        # log ratio spread around 0: ratios from about exp(-spread) to exp(spread), both sides of the clip
        log_ratio = torch.zeros(B, T, dtype=torch.float64) if on_policy else (
            (torch.rand(B, T, generator=gen, dtype=torch.float64) * 2 - 1) * spread)
        if not on_policy and spread >= 0.3 and T >= 2:
            # every row has a ratio above 1 + eps and one below 1 - eps, whatever the seed
            log_ratio[:, 0], log_ratio[:, -1] = 0.9 * spread, -0.9 * spread
        new = old + log_ratio
        a = torch.randn(B, 1, generator=gen, dtype=torch.float64)
        if adv == "positive":
            a = a.abs() + 0.1
        elif adv == "negative":
            a = -a.abs() - 0.1
        else:  # both signs in every case, and one response with A = 0
            a[0, 0] = 0.0
            if B > 2:
                a[1, 0], a[2, 0] = a[1, 0].abs() + 0.1, -a[2, 0].abs() - 0.1
        return {"advantages": (a if column else a.view(-1)).to(dtype), "policy_log_probs": new.to(dtype),
                "old_log_probs": old.to(dtype), "cliprange": cliprange,
                "weights": torch.randn(B, T, generator=gen, dtype=torch.float64).to(dtype)}

    return [
        ("mixed_advantages_B4_T9_eps0.2", case(4, 9)),
        ("positive_advantages_B3_T12_eps0.2", case(3, 12, adv="positive")),
        ("negative_advantages_B3_T12_eps0.2", case(3, 12, adv="negative")),
        ("eps0.1_B5_T8", case(5, 8, cliprange=0.1)),
        ("eps0.5_wide_ratios_B4_T10", case(4, 10, cliprange=0.5, spread=1.5)),
        ("ratios_near_one_B3_T6", case(3, 6, spread=0.05)),
        ("on_policy_ratio_one_B4_T7", case(4, 7, on_policy=True)),
        ("log_probs_near_minus_100_B3_T6", case(3, 6, level=20.0, offset=90.0)),
        ("square_B5_T5", case(5, 5)),
        ("advantages_as_vector_square_B4_T4", case(4, 4, column=False)),
        ("float64_B3_T6", case(3, 6, dtype=torch.float64)),
        ("T1_B6", case(6, 1)),
        ("B1_T10", case(1, 10, adv="negative")),
        ("B8_T64_eps0.2", case(8, 64)),
    ]


# ---------------------------------------------------------------- the correct versions
# one realistic edit each of the reference's formula
# the correct version 'minimum_of_two_terms' (autograder/graded/compute_grpo_clip_loss/test_compute_grpo_clip_loss.py), which the edits start from
MINIMUM = """
        import torch
        def compute_grpo_clip_loss(advantages, policy_log_probs, old_log_probs, cliprange):
            adv = advantages.reshape(-1, 1)
            ratio = torch.exp(policy_log_probs - old_log_probs)
            unclipped = ratio * adv
            clipped = torch.clamp(ratio, 1.0 - cliprange, 1.0 + cliprange) * adv
            return -torch.minimum(unclipped, clipped), {"clipped": clipped < unclipped}
    """

RETURN = 'return -torch.minimum(unclipped, clipped), {"clipped": clipped < unclipped}'

RATIO = "ratio = torch.exp(policy_log_probs - old_log_probs)"


CORRECT = {
    "minimum_of_two_terms": MINIMUM,
    # A >= 0: the objective is min(ratio, 1 + eps) * A; A < 0: max(ratio, 1 - eps) * A
    "where_on_the_sign_of_A": """
        import torch
        def compute_grpo_clip_loss(advantages, policy_log_probs, old_log_probs, cliprange):
            A = advantages if advantages.dim() == 2 else advantages[:, None]
            ratio = (policy_log_probs - old_log_probs).exp()
            positive = (A >= 0).expand_as(ratio)
            capped = torch.where(positive, ratio.clamp(max=1 + cliprange), ratio.clamp(min=1 - cliprange))
            clipped = torch.where(positive, ratio > 1 + cliprange, ratio < 1 - cliprange) & (A != 0)
            return -capped * A, {"clipped": clipped}
    """,
    "float64_inside": """
        import torch
        def compute_grpo_clip_loss(advantages, policy_log_probs, old_log_probs, cliprange):
            dtype = policy_log_probs.dtype
            A = advantages.double().view(-1, 1)
            ratio = torch.exp(policy_log_probs.double() - old_log_probs.double())
            surr1 = ratio * A
            surr2 = ratio.clamp(1 - cliprange, 1 + cliprange) * A
            loss = -torch.min(surr1, surr2)
            return loss.to(dtype), {"clipped": surr2 < surr1, "ratio": ratio.detach().to(dtype)}
    """,
    "min_max_instead_of_clamp": """
        import torch
        def compute_grpo_clip_loss(advantages, policy_log_probs, old_log_probs, cliprange):
            adv = advantages.unsqueeze(-1) if advantages.dim() == 1 else advantages
            ratio = torch.exp(policy_log_probs - old_log_probs)
            upper = torch.full_like(ratio, 1 + cliprange)
            lower = torch.full_like(ratio, 1 - cliprange)
            clipped_ratio = torch.maximum(torch.minimum(ratio, upper), lower)
            obj = torch.stack([ratio * adv, clipped_ratio * adv]).min(dim=0).values
            return -obj, {"clipped": clipped_ratio * adv < ratio * adv}
    """,
    # exp(a) / exp(b) is 0/0 below -104 in float32; shifted by the larger of the two it never underflows
    # (the ratio does not depend on the shift, so the shift needs no gradient)
    "ratio_of_shifted_exps": """
        import torch
        def compute_grpo_clip_loss(advantages, policy_log_probs, old_log_probs, cliprange):
            adv = advantages.reshape(len(advantages), 1)
            shift = torch.maximum(policy_log_probs, old_log_probs).detach()
            ratio = torch.exp(policy_log_probs - shift) / torch.exp(old_log_probs - shift)
            unclipped = ratio * adv
            clipped = ratio.clamp(1 - cliprange, 1 + cliprange) * adv
            loss = -torch.where(clipped < unclipped, clipped, unclipped)
            return loss, {"clipped": clipped < unclipped}
    """,
}


# catalogued mistakes written another way: recognition is about what a function does, not its text
SAME_MISTAKES = {
    # the inverted ratio computed in float64 and cast back
    "inverted_ratio_in_float64": ("ratio_inverted", """
        import torch
        def compute_grpo_clip_loss(advantages, policy_log_probs, old_log_probs, cliprange):
            A = advantages.double().reshape(-1, 1)
            ratio = torch.exp(old_log_probs.double() - policy_log_probs.double())
            surr1, surr2 = ratio * A, ratio.clamp(1 - cliprange, 1 + cliprange) * A
            return -torch.min(surr1, surr2).to(policy_log_probs.dtype), {"clipped": surr2 < surr1}
    """),
    # no clip, row by row
    "unclipped_loop_over_rows": ("no_clip", """
        import torch
        def compute_grpo_clip_loss(advantages, policy_log_probs, old_log_probs, cliprange):
            a = advantages.reshape(-1)
            rows = [-torch.exp(policy_log_probs[b] - old_log_probs[b]) * a[b] for b in range(len(a))]
            loss = torch.stack(rows)
            return loss, {"clipped": torch.zeros(loss.shape, dtype=torch.bool)}
    """),
}


# ---------------------------------------------------------------- the known mistakes
MISTAKES = {
    # -(-min): gradient ascent on the clipped loss
    "clip_sign_flipped": Mistake(
        "returns min(ratio * A, clip(ratio) * A) without the minus sign: minimising it is gradient ascent on the loss",
        edited(MINIMUM, ("return -torch.minimum(", "return torch.minimum(")),
        ["mixed_advantages_B4_T9_eps0.2", "on_policy_ratio_one_B4_T7"]),
    # the clamp on the advantage instead of the ratio
    "clamp_on_the_advantage": Mistake(
        "clamps the advantage to [1 - eps, 1 + eps] instead of the ratio",
        edited(MINIMUM, (
            "clipped = torch.clamp(ratio, 1.0 - cliprange, 1.0 + cliprange) * adv",
            "clipped = ratio * torch.clamp(adv, 1.0 - cliprange, 1.0 + cliprange)")),
        ["mixed_advantages_B4_T9_eps0.2"]),
    # the optimistic bound: no pessimism, the clip never stops a large step
    "max_instead_of_min": Mistake(
        "takes the larger of the two terms (the optimistic bound), so the clip never stops a large step",
        edited(MINIMUM, ("-torch.minimum(", "-torch.maximum(")),
        ["positive_advantages_B3_T12_eps0.2", "negative_advantages_B3_T12_eps0.2"]),
    # pi_old / pi instead of pi / pi_old
    "ratio_inverted": Mistake(
        "computes the ratio as pi_old / pi_theta, exp(old - new), instead of pi_theta / pi_old",
        edited(MINIMUM, (RATIO, "ratio = torch.exp(old_log_probs - policy_log_probs)")),
        ["mixed_advantages_B4_T9_eps0.2"]),
    # exp underflows to 0 below about -104 in float32: 0 / 0 = NaN
    "ratio_as_exp_over_exp": Mistake(
        "computes the ratio as exp(new) / exp(old), which is 0 / 0 = NaN for log-probs below about -104 in float32",
        edited(MINIMUM, (
            RATIO, "ratio = torch.exp(policy_log_probs) / torch.exp(old_log_probs)")),
        ["log_probs_near_minus_100_B3_T6"]),
    # "outside the clip range" is not "clipped": for A > 0 a ratio below 1 - eps keeps its gradient
    "clip_mask_ignores_the_sign_of_A": Mistake(
        "marks every ratio outside [1 - eps, 1 + eps] as clipped, though for A > 0 a ratio below 1 - eps keeps its gradient",
        edited(MINIMUM, (
            RETURN,
            "mask = (ratio < 1 - cliprange) | (ratio > 1 + cliprange)\n"
            '            return -torch.minimum(unclipped, clipped), {"clipped": mask}')),
        ["positive_advantages_B3_T12_eps0.2", "negative_advantages_B3_T12_eps0.2"]),
    # <= marks every token inside the range too, where both terms are equal (and every token of A = 0)
    "clip_mask_not_strict": Mistake(
        "marks a token clipped where the two terms are equal (<= instead of <), so tokens inside the range count as clipped",
        edited(MINIMUM, ('"clipped": clipped < unclipped', '"clipped": clipped <= unclipped')),
        ["ratios_near_one_B3_T6", "on_policy_ratio_one_B4_T7"]),
    # the importance-weighted loss without any clip
    "no_clip": Mistake(
        "returns the importance-weighted loss -ratio * A without any clip",
        edited(MINIMUM, (
            "unclipped = ratio * adv\n"
            "            clipped = torch.clamp(ratio, 1.0 - cliprange, 1.0 + cliprange) * adv\n"
            "            " + RETURN,
            'return -ratio * adv, {"clipped": torch.zeros_like(ratio, dtype=torch.bool)}')),
        ["mixed_advantages_B4_T9_eps0.2", "eps0.5_wide_ratios_B4_T10"]),
    # the ratio from detached log-probs (as for the metadata): the loss has the right value and no graph
    "ratio_detached": Mistake(
        "computes the ratio from detached log-probs, so the loss has the right value but no gradient",
        edited(MINIMUM, (RATIO, "ratio = torch.exp(policy_log_probs.detach() - old_log_probs)"), (
            '{"clipped": clipped < unclipped}', '{"clipped": clipped < unclipped, "ratio": ratio}')),
        ["mixed_advantages_B4_T9_eps0.2", "on_policy_ratio_one_B4_T7"],
        # it raises on every case that asks for no error (RuntimeError in backward: no graph):
        # an exception's class alone is no evidence of this mistake, so recognition cannot name it
        recognisable=False),
}
