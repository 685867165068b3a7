"""The known mistakes of `compute_grpo_clip_loss` (notebook 07): the catalogue `autograder.mistakes` describes."""

from __future__ import annotations

from autograder.mistakes import Mistake, edited


# one realistic edit each of the reference's formula
# the correct version 'minimum_of_two_terms' (tests/graded/test_compute_grpo_clip_loss.py), which the edits start from
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
