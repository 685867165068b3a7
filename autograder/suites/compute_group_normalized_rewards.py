"""Hidden cases of `compute_group_normalized_rewards(reward_fn, rollout_responses,
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

GRADED = "compute_group_normalized_rewards"


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


def call(fn, inputs: dict) -> dict:
    table = inputs["table"]

    def reward_fn(response: str, ground_truth: str) -> dict[str, float]:
        return dict(table[(response, ground_truth)])

    advantages, raw_rewards, _metadata = fn(
        reward_fn, list(inputs["responses"]), list(inputs["ground_truths"]), inputs["group_size"],
        inputs["advantage_eps"], inputs["normalize_by_std"],
    )
    return {"advantages": advantages, "raw_rewards": raw_rewards}
