"""off_policy_pairs (notebook 12): the reference's contract. Its correct versions and known mistakes
are in grader.py (tests/test_graded.py runs them through the judge).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from course_lib import gsm8k_to_r1_zero, off_policy_pairs, r1_zero_reward_fn
from tests.helpers import problems, PROPERTY_SETTINGS


words = st.text(alphabet=st.sampled_from(list("abc xyz=+-*.,\n0123456789")), max_size=30)


# ---------------------------------------------------------------- the reference
def test_reference_on_gold_records_changes_the_answer_alone_and_makes_it_wrong():
    records = [gsm8k_to_r1_zero(p) for p in problems(30)]
    pairs = off_policy_pairs(records)
    assert len(pairs) == len(records)
    for rec, pair in zip(records, pairs):
        assert set(pair) == {"prompt", "chosen", "rejected", "ground_truth"}
        assert (pair["prompt"], pair["chosen"], pair["ground_truth"]) == (rec["prompt"], rec["output"], rec["ground_truth"])
        head = rec["output"][:rec["output"].rfind("<answer>")]
        assert pair["rejected"] == f"{head}<answer> {int(rec['ground_truth']) + 1} </answer>"
        assert r1_zero_reward_fn(pair["chosen"], pair["ground_truth"])["reward"] == 1.0
        assert r1_zero_reward_fn(pair["rejected"], pair["ground_truth"])["reward"] == 0.0


@settings(PROPERTY_SETTINGS, max_examples=60)
@given(words, words, words, words, st.integers(-10**6, 10**6), st.sampled_from(["", " ", "\n", "  \t"]))
def test_reference_replaces_the_inside_of_the_last_block(before, first, between, after, n, pad):
    output = f"{before}<answer>{first}</answer>{between} </think> <answer>{pad}{n}{pad}</answer>{after}"
    (pair,) = off_policy_pairs([{"prompt": "P", "output": output, "ground_truth": f" {n} "}])
    assert pair["rejected"] == f"{before}<answer>{first}</answer>{between} </think> <answer> {n + 1} </answer>{after}"
    assert pair["chosen"] == output and pair["ground_truth"] == str(n)


def test_reference_errors_name_the_example():
    good = {"prompt": "P", "output": " </think> <answer> 4 </answer>", "ground_truth": "4"}
    with pytest.raises(ValueError, match="example 1: output has no"):
        off_policy_pairs([good, {**good, "output": " </think> 4"}])
    with pytest.raises(ValueError, match="example 0: output has no"):
        off_policy_pairs([{**good, "output": " </think> <answer> 4"}])
    with pytest.raises(ValueError, match="not an integer"):
        off_policy_pairs([{**good, "ground_truth": "3.5"}])
    with pytest.raises(ValueError, match="'output'"):
        off_policy_pairs([{"prompt": "P", "ground_truth": "4"}])
    assert off_policy_pairs([]) == []
