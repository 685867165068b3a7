"""thinking_format_reward (notebook 13): the reference's contract. Its correct versions and known
mistakes are in grader.py (tests/test_graded.py runs them through the judge).
"""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from course_lib import split_reasoning, thinking_format_reward
from tests.helpers import PROPERTY_SETTINGS


texts = st.lists(st.sampled_from(["<think>", "</think>", "x", " 12", "\n", "  "]), max_size=8).map("".join)


# ---------------------------------------------------------------- the reference
@PROPERTY_SETTINGS
@given(texts, st.booleans())
def test_reference_is_1_iff_a_closed_block_is_followed_by_an_answer(completion, prefilled):
    reasoning, answer = split_reasoning(completion, prefilled)
    closed = reasoning is not None and answer != ""  # a block that never closes has no answer
    assert thinking_format_reward(completion, prefilled) == (1.0 if closed else 0.0)


@pytest.mark.parametrize("completion, prefilled, reward", [
    (" 2 + 2 = 4 </think> 4", True, 1.0),  # prefilled: the completion starts inside the block
    ("<think> 2 + 2 = 4 </think> 4", False, 1.0),  # generated: it opens the block itself
    ("<think> 2 + 2 = 4 </think> 4", True, 0.0),  # a second <think>: a nested block that never closes
    (" 2 + 2 = 4 </think> 4", False, 0.0),  # no opening
    ("4", False, 0.0),
    ("<think></think>4", False, 1.0),
    ("<think> a <think> b </think> 4", False, 0.0),
    ("a </think>  \n", True, 0.0),
])
def test_reference_in_both_modes(completion, prefilled, reward):
    assert thinking_format_reward(completion, prefilled) == reward
    assert isinstance(thinking_format_reward(completion, prefilled), float)
