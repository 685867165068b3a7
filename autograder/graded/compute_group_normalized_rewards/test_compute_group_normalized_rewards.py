"""compute_group_normalized_rewards (notebook 06): the reference's contract. Its correct versions and
known mistakes are in grader.py (tests/test_graded.py runs them through the judge).
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, strategies as st

from course_lib import compute_group_normalized_rewards
from tests.helpers import PROPERTY_SETTINGS, seeds


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
