"""on_policy_pairs (notebook 12): the reference's contract, correct versions that earn full marks
through the real judge, and realistic mistakes that lose them (CONTRIBUTING.md, "Adding a graded
function")."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autograder.mistakes.on_policy_pairs import BASE
from course_lib import on_policy_pairs, r1_zero_reward_fn
from tests.helpers import PROPERTY_SETTINGS, corpus_tests, many_draws_test

SUITE = "on_policy_pairs"


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


CORRECT = {
    "loop_with_a_seen_set": BASE,
    # distinct texts with dict.fromkeys, then two comprehensions and a sliced zip
    "fromkeys_and_zip": """
        def on_policy_pairs(reward_fn, prompts, responses, ground_truths, group_size, max_pairs_per_group=1):
            n = len(responses)
            if len(prompts) != n or len(ground_truths) != n:
                raise ValueError("lengths differ")
            if group_size <= 0 or n % group_size:
                raise ValueError("bad group_size")
            out = []
            for g in range(n // group_size):
                sl = slice(g * group_size, (g + 1) * group_size)
                group_prompts, group_truths = set(prompts[sl]), set(ground_truths[sl])
                if len(group_prompts) > 1 or len(group_truths) > 1:
                    raise ValueError(f"group {g} mixes questions")
                prompt, truth = prompts[sl][0], ground_truths[sl][0]
                distinct = list(dict.fromkeys(responses[sl]))
                graded = [(r, reward_fn(r, truth)["reward"] == 1.0) for r in distinct]
                good = [r for r, ok in graded if ok]
                bad = [r for r, ok in graded if not ok]
                out += [dict(prompt=prompt, chosen=c, rejected=r, ground_truth=truth)
                        for c, r in list(zip(good, bad))[:max_pairs_per_group]]
            return out
    """,
    # itertools: islice of the zip, groups by index arithmetic
    "itertools_islice": """
        from itertools import islice
        def on_policy_pairs(reward_fn, prompts, responses, ground_truths, group_size, max_pairs_per_group=1):
            if len({len(prompts), len(responses), len(ground_truths)}) != 1:
                raise ValueError("prompts, responses, ground_truths: not the same length")
            if not isinstance(group_size, int) or group_size < 1 or len(responses) % group_size != 0:
                raise ValueError("group_size does not divide the batch")
            result = []
            groups = [range(i, i + group_size) for i in range(0, len(responses), group_size)]
            for idx in groups:
                if any(prompts[i] != prompts[idx[0]] or ground_truths[i] != ground_truths[idx[0]] for i in idx):
                    raise ValueError("group with different prompts or ground truths")
                correct, wrong = [], []
                for i in idx:
                    text = responses[i]
                    if text in correct or text in wrong:
                        continue
                    r = reward_fn(text, ground_truths[i])
                    (correct if r["reward"] == 1.0 else wrong).append(text)
                for c, w in islice(zip(correct, wrong), max_pairs_per_group):
                    result.append({"prompt": prompts[idx[0]], "chosen": c, "rejected": w, "ground_truth": ground_truths[idx[0]]})
            return result
    """,
    # two pointers over the group, each reward computed once per distinct text (a dict as the cache)
    "two_pointers_reward_cache": """
        def on_policy_pairs(reward_fn, prompts, responses, ground_truths, group_size, max_pairs_per_group=1):
            N = len(responses)
            if N != len(prompts) or N != len(ground_truths):
                raise ValueError("length mismatch")
            if group_size < 1 or N % group_size:
                raise ValueError("group_size")
            pairs = []
            g = 0
            while g < N:
                block = list(zip(prompts[g:g + group_size], responses[g:g + group_size], ground_truths[g:g + group_size]))
                if len({p for p, _, _ in block}) != 1:
                    raise ValueError("prompts differ in a group")
                if len({t for _, _, t in block}) != 1:
                    raise ValueError("ground_truths differ in a group")
                prompt, truth = block[0][0], block[0][2]
                grade = {}
                for _, r, _ in block:
                    if r not in grade:
                        grade[r] = reward_fn(r, truth)["reward"] == 1.0
                order = list(grade)
                i = j = made = 0
                while made < max_pairs_per_group:
                    while i < len(order) and not grade[order[i]]:
                        i += 1
                    while j < len(order) and grade[order[j]]:
                        j += 1
                    if i == len(order) or j == len(order):
                        break
                    pairs.append({"prompt": prompt, "chosen": order[i], "rejected": order[j], "ground_truth": truth})
                    i, j, made = i + 1, j + 1, made + 1
                g += group_size
            return pairs
    """,
}


test_correct_version_earns_full_marks, test_mistake_loses_its_points = corpus_tests(SUITE, CORRECT)
test_each_version_holds_on_many_draws = many_draws_test(SUITE, CORRECT, draws=10)
