"""split_reasoning (notebook 13): the reference's contract. Its correct versions and known mistakes are
in grader.py (tests/test_graded.py runs them through the judge).
"""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from course_lib import split_reasoning
from tests.helpers import PROPERTY_SETTINGS


words = st.lists(st.sampled_from(["x", "7 + 5 = 12", "so", "12", "\n", " "]), max_size=4).map("".join)


@st.composite
def blocks(draw, depth=0):
    """A balanced think block's inside: text with nested blocks (at most 3 deep)."""
    parts = [draw(words)]
    for _ in range(draw(st.integers(0, 2 if depth < 3 else 0))):
        parts += ["<think>", draw(blocks(depth + 1)), "</think>", draw(words)]
    return "".join(parts)


# ---------------------------------------------------------------- the reference
@PROPERTY_SETTINGS
@given(blocks(), words, st.sampled_from(["", " ", "\n  "]))
def test_reference_splits_at_the_matching_close_in_both_modes(inside, after, space):
    answer = after + "</think>" + after  # a stray close in the answer stays in it
    assert split_reasoning(f"{inside}</think>{answer}", True) == (inside.strip(), answer.strip())
    assert split_reasoning(f"{space}<think>{inside}</think>{answer}", False) == (inside.strip(), answer.strip())
    # read in the other mode: a block that never closes (its <think> nests), or a direct answer
    generated = f"<think>{inside}</think>{after}"
    assert split_reasoning(generated, True) == (generated.strip(), "")
    if not inside.lstrip().startswith("<think>"):
        assert split_reasoning(f"{inside}</think>{answer}", False) == (None, f"{inside}</think>{answer}".strip())


def test_reference_edge_cases():
    assert split_reasoning("  12 ", False) == (None, "12")
    assert split_reasoning("12 <think> x </think> 13", False) == (None, "12 <think> x </think> 13")
    assert split_reasoning("x </think> 12", False) == (None, "x </think> 12")
    assert split_reasoning("<think> x", False) == ("x", "")
    assert split_reasoning(" x ", True) == ("x", "")
    assert split_reasoning("a <think> b </think> c </think> 12", True) == ("a <think> b </think> c", "12")
    assert split_reasoning("<think></think>12", False) == ("", "12")
    assert split_reasoning("<think> x </think>", False) == ("x", "")


@pytest.mark.parametrize("completion, prefilled", [("<think> a <think> b </think> c", False), ("a <think> b </think> c", True)])
def test_reference_nested_block_that_never_closes(completion, prefilled):
    reasoning, answer = split_reasoning(completion, prefilled)
    assert answer == "" and reasoning.endswith("c")
