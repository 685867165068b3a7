"""on_policy_pairs (notebook 12): the reference's contract. Its correct versions and known mistakes are
in grader.py (tests/test_graded.py runs them through the judge).
"""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from course_lib import on_policy_pairs, r1_zero_reward_fn
from tests.helpers import PROPERTY_SETTINGS


def by_letter(response, ground_truth):
    """A toy reward: correct when the response starts with the ground truth's letter."""
    return {"reward": 1.0 if response[0] == ground_truth else 0.0}


def draw_groups(data, n_groups, group_size):
    """Responses like "c3" (correct) and "w1" (wrong): a small alphabet, so texts repeat."""
    texts = st.builds(lambda ok, k: f"{'c' if ok else 'w'}{k}", st.booleans(), st.integers(0, 3))
    return [data.draw(st.lists(texts, min_size=group_size, max_size=group_size)) for _ in range(n_groups)]


# ---------------------------------------------------------------- the reference
@PROPERTY_SETTINGS
@given(st.data(), st.integers(1, 4), st.integers(1, 6), st.integers(1, 4))
def test_reference_pairs_the_kth_distinct_correct_with_the_kth_distinct_wrong(data, n_groups, group_size, max_pairs):
    groups = draw_groups(data, n_groups, group_size)
    prompts = [f"P{g}" for g in range(n_groups) for _ in range(group_size)]
    pairs = on_policy_pairs(by_letter, prompts, [t for g in groups for t in g], ["c"] * len(prompts), group_size,
                            max_pairs_per_group=max_pairs)
    expected = []
    for g, texts in enumerate(groups):
        distinct = list(dict.fromkeys(texts))
        good, bad = [t for t in distinct if t[0] == "c"], [t for t in distinct if t[0] == "w"]
        expected += [{"prompt": f"P{g}", "chosen": c, "rejected": r, "ground_truth": "c"}
                     for c, r in list(zip(good, bad))[:max_pairs]]
    assert pairs == expected


def test_reference_default_is_one_pair_per_group_and_the_reward_decides():
    right, wrong = " 2 + 2 = 4 </think> <answer> 4 </answer>", " 2 + 2 = 5 </think> <answer> 5 </answer>"
    four = " four </think> <answer> 4.0 </answer>"
    pairs = on_policy_pairs(r1_zero_reward_fn, ["Q"] * 4, [wrong, right, four, " 4"], ["4"] * 4, 4)
    assert pairs == [{"prompt": "Q", "chosen": right, "rejected": wrong, "ground_truth": "4"}]
    half = lambda response, truth: {"reward": 0.5}  # noqa: E731 - partial credit is not correct
    assert on_policy_pairs(half, ["Q"] * 2, ["a", "b"], ["4"] * 2, 2) == []


def test_reference_errors():
    with pytest.raises(ValueError, match="same length"):
        on_policy_pairs(by_letter, ["P"] * 3, ["c", "w", "c"], ["c"] * 2, 3)
    with pytest.raises(ValueError, match="divide"):
        on_policy_pairs(by_letter, ["P"] * 4, ["c", "w", "c", "w"], ["c"] * 4, 3)
    with pytest.raises(ValueError, match="prompts: group 1"):
        on_policy_pairs(by_letter, ["P", "P", "P", "Q"], ["c", "w", "c", "w"], ["c"] * 4, 2)
    with pytest.raises(ValueError, match="ground_truths: group 0"):
        on_policy_pairs(by_letter, ["P"] * 2, ["c", "w"], ["c", "d"], 2)
