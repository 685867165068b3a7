"""The grader's side of `compute_group_normalized_rewards` (notebook 06): how its hidden cases are
drawn, the correct versions that must earn full marks and the known mistakes that must lose them,
each with the sentence a student reads (`autograder.mistakes`). Never in a student kit or the
grading sandbox, which hold the folder's __init__.py only.

Hidden cases of `compute_group_normalized_rewards(reward_fn, rollout_responses,
repeated_ground_truths, group_size, advantage_eps, normalize_by_std) -> (advantages, raw_rewards,
metadata)`.

A reward function cannot be stored in a case file, so each case holds a table of reward dicts
keyed by (response, ground truth), and `call` builds `reward_fn(response, ground_truth)` from it.
In the cases of continuous rewards the table's "reward" differs from its 0/1 "answer_reward": the
advantage is built from "reward". Outputs: the advantages and the raw rewards (N,); the metadata is free-form and not
compared.

What the cases are built to catch: a biased std (`unbiased=False`; every std case has groups of
2 to 8), groups cut the wrong way (`view(group_size, -1)`; no case has N = group_size ** 2),
NaN on a constant group (with eps 0 too), a constant group that is not exactly 0 (its float32
mean need not equal its rewards: three 0.9s; and "std == 0" misses it in a batch of one group),
std normalisation applied when normalize_by_std is False, eps added somewhere else than to the std
(eps 0.5), group size 1, and "answer_reward" used in place of "reward".
"""

from __future__ import annotations

import torch

from autograder.mistakes import edited, Mistake


# ---------------------------------------------------------------- the hidden cases
def make_inputs(gen: torch.Generator) -> list[tuple[str, dict]]:
    counter = iter(range(10**6))

    def responses_for(gold: str, rewards: list[float]) -> tuple[list[str], dict]:
        """One group: distinct response strings for `gold`, and their reward dicts. With
        continuous rewards, "answer_reward" (0/1) is not "reward": the advantage uses "reward"."""
        texts, table = [], {}
        for r in rewards:
            n = next(counter)
            text = f" step {n}: {n % 97} + {n % 13} </think> <answer> {int(r * 10)} </answer>"
            table[(text, gold)] = {"format_reward": 1.0, "answer_reward": 1.0 if r > 0.5 else 0.0, "reward": float(r)}
            texts.append(text)
        return texts, table

    def case(groups: list[list[float]], eps: float, std: bool) -> dict:
        responses, golds, table = [], [], {}
        for g, rewards in enumerate(groups):
            gold = str(int(torch.randint(0, 10_000, (1,), generator=gen)) * 10 + g)
            texts, part = responses_for(gold, rewards)
            responses += texts
            golds += [gold] * len(texts)
            table.update(part)
        return {"responses": responses, "ground_truths": golds, "table": table,
                "group_size": len(groups[0]), "advantage_eps": eps, "normalize_by_std": std}

    def binary_groups(n_groups: int, size: int, constant: tuple[float, ...] = (0.0, 1.0)) -> list[list[float]]:
        """Random 0/1 groups, with the given constant groups placed among them, and at least
        one group of mixed rewards."""
        groups = []
        for _ in range(n_groups - len(constant) - 1):
            groups.append((torch.rand(size, generator=gen) < torch.rand(1, generator=gen)).float().tolist())
        mixed = [1.0] + [0.0] * (size - 1)
        groups.append([mixed[int(i)] for i in torch.randperm(size, generator=gen)])
        groups += [[c] * size for c in constant]
        order = torch.randperm(len(groups), generator=gen).tolist()
        return [groups[i] for i in order]

    def continuous(n_groups: int, size: int, scale: float = 1.0, shift: float = 0.0) -> list[list[float]]:
        return [(torch.randn(size, generator=gen, dtype=torch.float64) * scale + shift).tolist() for _ in range(n_groups)]

    binary8 = binary_groups(4, 8)
    return [
        ("binary_G8_4groups_std", case(binary8, 1e-6, True)),
        ("binary_G8_4groups_no_std", case(binary8, 1e-6, False)),
        ("binary_G8_16groups_std", case(binary_groups(16, 8), 1e-6, True)),
        ("continuous_G4_5groups_std", case(continuous(5, 4), 1e-6, True)),
        ("continuous_G5_3groups_no_std", case(continuous(3, 5, 2.0, 1.0), 1e-6, False)),
        ("continuous_G3_4groups_eps_half", case(continuous(4, 3), 0.5, True)),
        ("G2_6groups_std", case(continuous(6, 2), 1e-6, True)),
        ("negative_rewards_G4_3groups_std", case(continuous(3, 4, 0.5, -2.0), 1e-6, True)),
        ("constant_groups_only_eps0_std", case([[0.0] * 4, [1.0] * 4, [0.5] * 4], 0.0, True)),
        # constant groups of rewards whose float32 mean is not the reward itself (3 x 0.9, 7 x 0.1, ...)
        ("constant_inexact_groups_eps0_std", case([[0.9] * 3, [0.1] * 3, [1 / 3] * 3, [0.7] * 3], 0.0, True)),
        ("constant_inexact_groups_eps0_no_std", case([[0.9] * 7, [0.3] * 7, [0.6] * 7], 0.0, False)),
        # a batch of one group: torch's std of a single (1, G) row is not exactly 0 there (7e-8 for
        # 3 x 0.9, while several rows at once give 0), so "std == 0" does not find the constant group
        ("constant_inexact_one_group_eps0_std", case([[0.9] * 3], 0.0, True)),
        ("constant_and_mixed_eps0_std", case(binary_groups(3, 6, constant=(1.0,)), 0.0, True)),
        ("group_size_1_std", case([[r] for r in continuous(1, 5)[0]], 1e-6, True)),
        ("group_size_1_no_std", case([[r] for r in continuous(1, 5)[0]], 1e-6, False)),
        ("one_group_G16_std", case(binary_groups(1, 16, constant=()), 1e-6, True)),
    ]


def truth(inputs: dict) -> dict:
    """The advantages in float64 from the rewards as given (the function's contract makes them a
    float32 tensor: a correct float32 answer differs by that rounding, which sets the tolerance)."""
    table = inputs["table"]
    rewards = torch.tensor([table[(r, g)]["reward"] for r, g in zip(inputs["responses"], inputs["ground_truths"])],
                           dtype=torch.float64)
    grouped = rewards.view(-1, inputs["group_size"])
    constant = grouped.max(dim=1, keepdim=True).values == grouped.min(dim=1, keepdim=True).values
    centered = torch.where(constant, torch.zeros_like(grouped), grouped - grouped.mean(dim=1, keepdim=True))
    if inputs["normalize_by_std"] and inputs["group_size"] > 1:
        centered = torch.where(constant, centered, centered / (grouped.std(dim=1, keepdim=True) + inputs["advantage_eps"]))
    return {"advantages": centered.reshape(-1), "raw_rewards": rewards}


# ---------------------------------------------------------------- the correct versions
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


# Every correct version must give a constant group exactly 0: its float mean need not equal its
# rewards (three 0.9s in float32), so "std == 0" is not a test of a constant group; each finds it
# its own way (max == min, all equal to the first, a set, or a mean taken after subtracting the first).
CORRECT = {
    "loop_over_groups": """
        import torch
        def compute_group_normalized_rewards(reward_fn, rollout_responses, repeated_ground_truths, group_size,
                                             advantage_eps, normalize_by_std):
            scores = [reward_fn(r, g) for r, g in zip(rollout_responses, repeated_ground_truths)]
            raw_rewards = torch.tensor([s["reward"] for s in scores], dtype=torch.float32)
            advantages = torch.zeros_like(raw_rewards)
            for start in range(0, len(raw_rewards), group_size):
                group = raw_rewards[start:start + group_size]
                if len(set(group.tolist())) == 1:  # all equal: no signal, exactly 0
                    continue
                adv = group - group.mean()
                if normalize_by_std:
                    adv = adv / (group.std() + advantage_eps)
                advantages[start:start + group_size] = adv
            return advantages, raw_rewards, {"reward_mean": raw_rewards.mean().item()}
    """,
    "reshape_and_where": """
        import torch
        def compute_group_normalized_rewards(reward_fn, rollout_responses, repeated_ground_truths, group_size,
                                             advantage_eps, normalize_by_std):
            raw = torch.tensor([reward_fn(r, g)["reward"] for r, g in zip(rollout_responses, repeated_ground_truths)])
            grouped = raw.reshape(-1, group_size)
            constant = (grouped == grouped[:, :1]).all(dim=1, keepdim=True)
            adv = grouped - grouped.mean(dim=1, keepdim=True)
            if normalize_by_std and group_size > 1:
                adv = adv / (grouped.std(dim=1, keepdim=True) + advantage_eps)
            adv = torch.where(constant, torch.zeros_like(adv), adv)  # also replaces a 0/0 NaN
            return adv.flatten(), raw, {}
    """,
    "float64_inside_masked_fill": """
        import torch
        def compute_group_normalized_rewards(reward_fn, rollout_responses, repeated_ground_truths, group_size,
                                             advantage_eps, normalize_by_std):
            rewards = [float(reward_fn(r, g)["reward"]) for r, g in zip(rollout_responses, repeated_ground_truths)]
            raw_rewards = torch.tensor(rewards, dtype=torch.float32)
            x = raw_rewards.double().view(-1, group_size)
            std, mean = torch.std_mean(x, dim=1, keepdim=True)
            adv = x - mean
            if normalize_by_std:
                adv = adv / (std + advantage_eps)
            constant = x.amax(dim=1, keepdim=True) == x.amin(dim=1, keepdim=True)
            adv = adv.masked_fill(constant, 0.0)
            return adv.view(-1).float(), raw_rewards, {"mean": raw_rewards.mean().item()}
    """,
    "mean_after_subtracting_the_first": """
        import torch
        def compute_group_normalized_rewards(reward_fn, rollout_responses, repeated_ground_truths, group_size,
                                             advantage_eps, normalize_by_std):
            raw_rewards = torch.tensor([reward_fn(r, g)["reward"] for r, g in zip(rollout_responses, repeated_ground_truths)],
                                       dtype=torch.float32)
            grouped = raw_rewards.view(-1, group_size)
            # shift by each group's first reward: a constant group is exactly 0 after it, so its mean,
            # its centred values and its std are exactly 0 too
            shifted = grouped - grouped[:, :1]
            centered = shifted - shifted.mean(dim=1, keepdim=True)
            if normalize_by_std:
                std = shifted.std(dim=1, keepdim=True) if group_size > 1 else torch.zeros_like(shifted[:, :1])
                denom = std + advantage_eps
                centered = torch.where(std > 0, centered / torch.where(denom > 0, denom, 1.0), 0.0)
            return centered.reshape(-1), raw_rewards, {}
    """,
    "list_comprehension_per_group": """
        import statistics
        import torch
        def compute_group_normalized_rewards(reward_fn, rollout_responses, repeated_ground_truths, group_size,
                                             advantage_eps, normalize_by_std):
            rewards = [reward_fn(r, g)["reward"] for r, g in zip(rollout_responses, repeated_ground_truths)]
            raw_rewards = torch.tensor(rewards, dtype=torch.float32)
            advantages = []
            for q in range(len(rewards) // group_size):
                group = raw_rewards[q * group_size:(q + 1) * group_size].tolist()  # the float32 values
                if max(group) == min(group):
                    advantages += [0.0] * group_size
                    continue
                mean = statistics.fmean(group)
                std = statistics.stdev(group)  # unbiased, like torch's default
                advantages += [(r - mean) / (std + advantage_eps) if normalize_by_std else r - mean for r in group]
            return torch.tensor(advantages, dtype=torch.float32), raw_rewards, {}
    """,
}


# ---------------------------------------------------------------- the known mistakes
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
