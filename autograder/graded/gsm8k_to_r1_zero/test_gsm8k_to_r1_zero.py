"""gsm8k_to_r1_zero (notebook 01): the reference's contract. Its correct versions and known mistakes
are in grader.py (tests/test_graded.py runs them through the judge).
"""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from course_lib import gsm8k_to_r1_zero, r1_zero_prompt_template, r1_zero_reward_fn
from tests.helpers import PROPERTY_SETTINGS


# ---------------------------------------------------------------- the reference
def test_gsm8k_to_r1_zero():
    ex = {"question": "Tom has 3 apples and buys 4. How many?", "answer": "Tom has 3 + 4 = <<3+4=7>>7 apples.\n#### 7"}
    r = gsm8k_to_r1_zero(ex)
    template = r1_zero_prompt_template()
    assert r["prompt"] == template.replace("{question}", ex["question"])
    assert r["prompt"].endswith("Assistant: <think>")
    assert r["output"] == " Tom has 3 + 4 = <<3+4=7>>7 apples. </think> <answer> 7 </answer>"
    assert r["ground_truth"] == "7"
    assert r1_zero_reward_fn(r["output"], r["ground_truth"])["reward"] == 1.0


words = st.text(alphabet="abc xyz?0123456789+=<>.\n", max_size=30)  # no '#', no braces


@PROPERTY_SETTINGS
@given(words, words, st.integers(0, 10**7), st.sampled_from([None, "Q: {question}\nA: <think>"]))
def test_reference_layout(question, reasoning, n, template):
    r = gsm8k_to_r1_zero({"question": question, "answer": f"{reasoning}\n#### {n:,}"}, template)
    assert r["prompt"] == (template or r1_zero_prompt_template()).replace("{question}", question)  # not stripped
    assert r["output"] == f" {reasoning.strip()} </think> <answer> {n} </answer>"
    assert r["ground_truth"] == str(n)
    assert r1_zero_reward_fn(r["output"], r["ground_truth"])["reward"] == 1.0


@PROPERTY_SETTINGS
@given(words, st.integers(0, 999), st.integers(0, 999))
def test_reference_cuts_at_the_last_marker(reasoning, first, last):
    before_last = f"{reasoning}\n#### {first}\nNo."  # the first marker stays in the thinking
    r = gsm8k_to_r1_zero({"question": "?", "answer": f"{before_last}\n#### {last}"})
    assert r["output"] == f" {before_last.strip()} </think> <answer> {last} </answer>"
    assert r["ground_truth"] == str(last)


def test_reference_without_marker_raises_value_error():
    with pytest.raises(ValueError):
        gsm8k_to_r1_zero({"question": "What is 2 + 2?", "answer": "It is 4."})
