"""The known mistakes of `compute_group_normalized_rewards` (notebook 06): the catalogue `autograder.mistakes` describes."""

from __future__ import annotations

from autograder.mistakes import Mistake, edited


# the reference's structure (course_lib/grpo.py) as a student writes it, and the mistakes as one realistic
# edit each of it (written out where the edit rewrites most of it)
REFERENCE_STRUCTURE = """
        import torch
        def compute_group_normalized_rewards(reward_fn, rollout_responses, repeated_ground_truths, group_size,
                                             advantage_eps, normalize_by_std):
            raw = torch.tensor([reward_fn(r, g)["reward"] for r, g in zip(rollout_responses, repeated_ground_truths)])
            grouped = raw.view(-1, group_size)
            constant = grouped.max(dim=1, keepdim=True).values == grouped.min(dim=1, keepdim=True).values
            centered = torch.where(constant, 0.0, grouped - grouped.mean(dim=1, keepdim=True))
            if normalize_by_std and group_size > 1:
                centered = torch.where(constant, 0.0, centered / (grouped.std(dim=1, keepdim=True) + advantage_eps))
            return centered.view(-1), raw, {}
    """

GUARD = "if normalize_by_std and group_size > 1:"

DIVIDE = "centered = torch.where(constant, 0.0, centered / (grouped.std(dim=1, keepdim=True) + advantage_eps))"

MISTAKES = {
    # torch.std(unbiased=False) divides by G: too small an advantage, worst for small groups
    "biased_std": Mistake(
        "divides by the biased std (unbiased=False, over G) instead of torch's default unbiased std",
        edited(REFERENCE_STRUCTURE, (GUARD, "if normalize_by_std:"), (
            DIVIDE,
            "std = grouped.std(dim=1, keepdim=True, unbiased=False)\n"
            "                centered = torch.where(constant, 0.0, centered / (std + advantage_eps))")),
        ["G2_6groups_std", "binary_G8_4groups_std", "continuous_G4_5groups_std"]),
    # view(group_size, -1): the same number of elements, the groups cut across questions
    "groups_transposed": Mistake(
        "groups with view(group_size, -1), which cuts the groups across questions",
        edited(REFERENCE_STRUCTURE, ("raw.view(-1, group_size)", "raw.view(group_size, -1)"),
                                     ("return centered.view(-1)", "return centered.reshape(-1)")),
        ["binary_G8_4groups_std", "binary_G8_4groups_no_std", "continuous_G4_5groups_std"]),
    # dividing by the std alone: 0/0 = NaN on a constant group
    "no_eps_nan_on_constant_group": Mistake(
        "divides by the std alone, so a constant group gives 0 / 0 = NaN instead of advantage 0",
        """
        import torch
        def compute_group_normalized_rewards(reward_fn, rollout_responses, repeated_ground_truths, group_size,
                                             advantage_eps, normalize_by_std):
            raw = torch.tensor([reward_fn(r, g)["reward"] for r, g in zip(rollout_responses, repeated_ground_truths)])
            grouped = raw.view(-1, group_size)
            centered = grouped - grouped.mean(dim=1, keepdim=True)
            if normalize_by_std:
                centered = centered / grouped.std(dim=1, keepdim=True)
            return centered.view(-1), raw, {}
    """,
        ["binary_G8_4groups_std", "constant_groups_only_eps0_std"]),
    # eps saves the constant group only while eps > 0: with eps 0 it is 0/0 = NaN again
    "eps_added_but_nan_when_eps_is_0": Mistake(
        "relies on eps to save a constant group, which gives 0 / 0 = NaN again when eps is 0",
        """
        import torch
        def compute_group_normalized_rewards(reward_fn, rollout_responses, repeated_ground_truths, group_size,
                                             advantage_eps, normalize_by_std):
            raw = torch.tensor([reward_fn(r, g)["reward"] for r, g in zip(rollout_responses, repeated_ground_truths)])
            grouped = raw.view(-1, group_size)
            centered = grouped - grouped.mean(dim=1, keepdim=True)
            if normalize_by_std:
                centered = centered / (grouped.std(dim=1, keepdim=True) + advantage_eps)
            return centered.view(-1), raw, {}
    """,
        ["constant_groups_only_eps0_std", "constant_and_mixed_eps0_std"]),
    # the unbiased std of one value is NaN, and NaN == 0 is False: a group of 1 gives NaN
    "nan_for_group_size_1": Mistake(
        "gives NaN for a group of one, whose unbiased std is NaN, instead of advantage 0",
        edited(REFERENCE_STRUCTURE, (GUARD, "if normalize_by_std:"), (
            DIVIDE,
            "std = grouped.std(dim=1, keepdim=True)\n"
            "                centered = torch.where(std == 0, 0.0, centered / (std + advantage_eps))")),
        ["group_size_1_std"]),
    # normalize_by_std ignored: always GRPO, never Dr. GRPO
    "std_applied_when_normalize_by_std_is_false": Mistake(
        "divides by the std even when normalize_by_std is False (Dr. GRPO)",
        edited(REFERENCE_STRUCTURE, (GUARD, "if group_size > 1:")),
        ["binary_G8_4groups_no_std", "continuous_G5_3groups_no_std"]),
    # sqrt(var + eps) instead of std + eps: indistinguishable at eps 1e-6, not at eps 0.5
    "eps_under_the_square_root": Mistake(
        "divides by sqrt(var + eps) instead of std + eps",
        edited(REFERENCE_STRUCTURE, (
            DIVIDE,
            "denom = (grouped.var(dim=1, keepdim=True) + advantage_eps).sqrt()\n"
            "                centered = torch.where(constant, 0.0, centered / denom)")),
        ["continuous_G3_4groups_eps_half"]),
    # the 0/1 correctness instead of the reward: equal on binary rewards, not on continuous ones
    "answer_reward_instead_of_reward": Mistake(
        "uses the answer reward (0/1 correctness) instead of the total reward",
        edited(REFERENCE_STRUCTURE, ('["reward"]', '["answer_reward"]')),
        ["continuous_G4_5groups_std", "continuous_G5_3groups_no_std"]),
    # "a constant group has std 0": not in float32, where mean(0.9, 0.9, 0.9) != 0.9f leaves a residue of
    # 6e-8; torch's std of several rows at once is exactly 0 there, but that of a single (1, G) row is
    # 7e-8, and the ratio is an advantage of 0.8 for a group with no signal (and without the std, the
    # residue stays)
    "constant_group_found_by_std_equal_0": Mistake(
        "finds a constant group by std == 0, which fails in float32 where the mean of equal values leaves a residue",
        """
        import torch
        def compute_group_normalized_rewards(reward_fn, rollout_responses, repeated_ground_truths, group_size,
                                             advantage_eps, normalize_by_std):
            raw = torch.tensor([reward_fn(r, g)["reward"] for r, g in zip(rollout_responses, repeated_ground_truths)])
            grouped = raw.view(-1, group_size)
            centered = grouped - grouped.mean(dim=1, keepdim=True)
            if normalize_by_std and group_size > 1:
                std = grouped.std(dim=1, keepdim=True)
                centered = torch.where(std == 0, 0.0, centered / (std + advantage_eps))
            return centered.view(-1), raw, {}
    """,
        ["constant_inexact_one_group_eps0_std", "constant_inexact_groups_eps0_no_std"]),
    # the same test in a loop over groups: each group's std is that of a single row, 7e-8 for three 0.9s
    "loop_constant_group_found_by_std_equal_0": Mistake(
        "tests each group's std == 0 in a loop, which misses a constant group whose float32 std is a tiny residue",
        """
        import torch
        def compute_group_normalized_rewards(reward_fn, rollout_responses, repeated_ground_truths, group_size,
                                             advantage_eps, normalize_by_std):
            raw = torch.tensor([reward_fn(r, g)["reward"] for r, g in zip(rollout_responses, repeated_ground_truths)])
            out = []
            for group in raw.split(group_size):
                std = group.std() if group_size > 1 else torch.tensor(0.0)
                if std == 0:
                    out.append(torch.zeros_like(group))
                elif normalize_by_std:
                    out.append((group - group.mean()) / (std + advantage_eps))
                else:
                    out.append(group - group.mean())
            return torch.cat(out), raw, {}
    """,
        ["constant_inexact_groups_eps0_std", "constant_inexact_one_group_eps0_std",
         "constant_inexact_groups_eps0_no_std"]),
    # Dr. GRPO's r - mean left as computed: a constant group of 0.9s keeps a residue of 6e-8, not exactly 0
    "no_std_residue_on_constant_group": Mistake(
        "leaves r - mean as computed without the std: a constant group keeps a tiny residue instead of exactly 0",
        """
        import torch
        def compute_group_normalized_rewards(reward_fn, rollout_responses, repeated_ground_truths, group_size,
                                             advantage_eps, normalize_by_std):
            raw = torch.tensor([reward_fn(r, g)["reward"] for r, g in zip(rollout_responses, repeated_ground_truths)])
            grouped = raw.view(-1, group_size)
            centered = grouped - grouped.mean(dim=1, keepdim=True)
            if normalize_by_std:
                std = grouped.std(dim=1, keepdim=True)
                constant = grouped.max(dim=1, keepdim=True).values == grouped.min(dim=1, keepdim=True).values
                centered = torch.where(constant, 0.0, centered / (std + advantage_eps))
            return centered.view(-1), raw, {}
    """,
        ["constant_inexact_groups_eps0_no_std"]),
    # the batch's mean and std instead of each group's: a baseline that does not belong to the question
    "batch_statistics_instead_of_group": Mistake(
        "centres (and scales) with the whole batch's mean and std instead of each group's",
        """
        import torch
        def compute_group_normalized_rewards(reward_fn, rollout_responses, repeated_ground_truths, group_size,
                                             advantage_eps, normalize_by_std):
            raw = torch.tensor([reward_fn(r, g)["reward"] for r, g in zip(rollout_responses, repeated_ground_truths)])
            if raw.max() == raw.min():
                return torch.zeros_like(raw), raw, {}
            adv = raw - raw.mean()
            if normalize_by_std:
                adv = adv / (raw.std() + advantage_eps)
            return adv, raw, {}
    """,
        ["binary_G8_4groups_std", "binary_G8_4groups_no_std", "continuous_G4_5groups_std"]),
    # float64 rewards: the values are right, the dtype is not the contract's float32
    "float64_tensors": Mistake(
        "returns float64 tensors where the contract asks for float32",
        edited(REFERENCE_STRUCTURE, (
            "repeated_ground_truths)])",
            "repeated_ground_truths)],\n                               dtype=torch.float64)")),
        ["binary_G8_4groups_std", "continuous_G4_5groups_std"]),
}
