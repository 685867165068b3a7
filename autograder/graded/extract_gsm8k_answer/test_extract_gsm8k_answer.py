"""extract_gsm8k_answer (notebook 01): the reference's contract. Its correct versions and known
mistakes are in grader.py (tests/test_graded.py runs them through the judge).
"""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from course_lib import extract_gsm8k_answer
from tests.helpers import PROPERTY_SETTINGS


# ---------------------------------------------------------------- the reference
@pytest.mark.parametrize(
    "text, expected",
    [("He has 3 + 4 = <<3+4=7>>7.\n#### 7", "7"), ("...\n#### 1,080", "1080"), ("x\n#### -5 ", "-5"), ("#### 0.5", "0.5")],
)
def test_extract_gsm8k_answer(text, expected):
    assert extract_gsm8k_answer(text) == expected


def test_extract_gsm8k_answer_without_marker_is_a_clear_error():
    with pytest.raises(ValueError, match="no '#### N'"):
        extract_gsm8k_answer("the answer is 5")


reasoning_text = st.text(alphabet="abc 0123456789+-*/=<>.,\n", max_size=40)  # never a '#'
spaces = st.sampled_from(["", " ", "  ", "\t", " \n", "\n\n"])


@PROPERTY_SETTINGS
@given(reasoning_text, st.integers(-10**9, 10**9), spaces, spaces)
def test_reference_reads_the_number_after_the_marker_without_commas(reasoning, n, before, after):
    assert extract_gsm8k_answer(f"{reasoning}\n####{before}{n:,}{after}") == str(n)


@PROPERTY_SETTINGS
@given(reasoning_text, st.integers(0, 10**6), st.integers(0, 10**6))
def test_reference_reads_the_last_marker(reasoning, first, last):
    assert extract_gsm8k_answer(f"{reasoning}\n#### {first}\n{reasoning}\n#### {last:,}") == str(last)


@PROPERTY_SETTINGS
@given(reasoning_text)
def test_reference_without_marker_raises_value_error(text):
    with pytest.raises(ValueError):
        extract_gsm8k_answer(text)
