"""compute_group_normalized_rewards (notebook 06): the reference's contract, correct versions that
earn full marks through the real judge, and realistic mistakes that lose them (CONTRIBUTING.md,
"Adding a graded function")."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from course_lib import compute_group_normalized_rewards
from tests.helpers import PROPERTY_SETTINGS, corpus_tests, many_draws_test, seeds

SUITE = "compute_group_normalized_rewards"


# ---------------------------------------------------------------- the reference
def reward_by_value(response, ground_truth):
    r = float(response == ground_truth)
    return {"reward": r, "format_reward": 1.0, "answer_reward": r}


def numeric_reward(response, ground_truth):
    """The response is the reward, written out (repr keeps every digit of a float)."""
    return {"reward": float(response), "format_reward": 1.0, "answer_reward": 0.0}


@PROPERTY_SETTINGS
@given(st.integers(1, 5), st.integers(2, 6), seeds, st.booleans(), st.sampled_from([1e-6, 0.1]))
def test_reference_matches_float64(n_groups, group_size, seed, use_std, eps):
    g = torch.Generator().manual_seed(seed)
    rewards = torch.randint(0, 4, (n_groups * group_size,), generator=g).double() / 2
    responses = [str(r.item()) for r in rewards]
    adv, raw, meta = compute_group_normalized_rewards(numeric_reward, responses, ["x"] * len(responses), group_size, eps, use_std)
    grouped = rewards.view(n_groups, group_size)
    centered = grouped - grouped.mean(1, keepdim=True)
    expected = centered / (grouped.std(1, keepdim=True) + eps) if use_std else centered
    torch.testing.assert_close(adv.double(), expected.view(-1), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(raw.double(), rewards)
    assert adv.shape == raw.shape == (n_groups * group_size,)
    assert adv.dtype == raw.dtype == torch.float32
    assert abs(meta["reward_mean"] - rewards.mean().item()) < 1e-6


@pytest.mark.parametrize("eps", [1e-6, 0.0])
@pytest.mark.parametrize("use_std", [True, False])
def test_reference_constant_reward_groups_get_zero_advantage_not_nan(eps, use_std):
    responses = ["a", "a", "a", "b", "a", "b"]
    gts = ["a", "a", "a", "a", "a", "a"]
    adv, raw, meta = compute_group_normalized_rewards(reward_by_value, responses, gts, 3, eps, use_std)
    assert not torch.isnan(adv).any()
    assert torch.equal(adv[:3], torch.zeros(3))
    assert adv[3:].abs().sum() > 0
    assert meta["zero_std_group_fraction"] == 0.5


@PROPERTY_SETTINGS
@given(st.lists(st.floats(-1e3, 1e3, allow_nan=False, allow_infinity=False), min_size=1, max_size=4),
       st.integers(1, 8), st.one_of(st.just(0.0), st.floats(0.0, 10.0)), st.booleans())
def test_reference_any_constant_group_is_exactly_zero(values, group_size, eps, use_std):
    """Every group constant, of arbitrary float rewards (three 0.9s: their float32 mean is not 0.9f,
    and a residue of 6e-8 over a std of 7e-8 would be an advantage of 0.8), for any eps >= 0."""
    responses = [repr(v) for v in values for _ in range(group_size)]
    adv, raw, meta = compute_group_normalized_rewards(numeric_reward, responses, ["x"] * len(responses), group_size,
                                                      eps, use_std)
    assert torch.equal(adv, torch.zeros(len(responses))), adv
    assert torch.equal(raw, torch.tensor([float(r) for r in responses], dtype=torch.float32))
    assert meta["zero_std_group_fraction"] == 1.0


@pytest.mark.parametrize("use_std", [True, False])
def test_reference_three_point_nines_are_exactly_zero(use_std):
    """The case that broke the reference: float32 mean(0.9, 0.9, 0.9) != 0.9f."""
    grouped = torch.tensor([0.9, 0.9, 0.9])
    assert grouped.mean() != grouped[0]  # the trap is real in float32
    adv, _, _ = compute_group_normalized_rewards(numeric_reward, ["0.9"] * 3, ["x"] * 3, 3, 0.0, use_std)
    assert torch.equal(adv, torch.zeros(3))


@PROPERTY_SETTINGS
@given(st.lists(st.floats(-1e3, 1e3, allow_nan=False, allow_infinity=False), min_size=1, max_size=6),
       st.one_of(st.just(0.0), st.floats(0.0, 10.0)), st.booleans())
def test_reference_group_size_one_gives_zero_advantage(values, eps, use_std):
    responses = [repr(v) for v in values]
    adv, _, _ = compute_group_normalized_rewards(numeric_reward, responses, ["x"] * len(values), 1, eps, use_std)
    assert torch.equal(adv, torch.zeros(len(values)))


def test_reference_group_size_one_of_binary_rewards():
    adv, _, _ = compute_group_normalized_rewards(reward_by_value, ["a", "b"], ["a", "a"], 1, 1e-6, True)
    assert torch.equal(adv, torch.zeros(2))


def test_reference_bad_sizes_are_clear_errors():
    with pytest.raises(ValueError, match="groups of group_size=4"):
        compute_group_normalized_rewards(reward_by_value, ["a"] * 6, ["a"] * 6, 4, 1e-6, True)
    with pytest.raises(ValueError, match="ground truths"):
        compute_group_normalized_rewards(reward_by_value, ["a"] * 4, ["a"] * 3, 2, 1e-6, True)


# ---------------------------------------------------------------- correct versions and mistakes
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


test_correct_version_earns_full_marks, test_mistake_loses_its_points = corpus_tests(SUITE, CORRECT)
test_each_version_holds_on_many_draws = many_draws_test(SUITE, CORRECT)
