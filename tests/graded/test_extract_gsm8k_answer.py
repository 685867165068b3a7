"""extract_gsm8k_answer (notebook 01): the reference's contract, correct versions that earn full
marks through the real judge, and realistic mistakes that lose them (CONTRIBUTING.md, "Adding a
graded function")."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from course_lib import extract_gsm8k_answer
from tests.helpers import PROPERTY_SETTINGS, corpus_tests, many_draws_test

SUITE = "extract_gsm8k_answer"


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


# ---------------------------------------------------------------- correct versions and mistakes
CORRECT = {
    # the notebook's regular expression: the look-ahead says no other marker follows
    "regex_look_ahead": r"""
        import re
        _FINAL_ANSWER = re.compile(r"####(?!.*####)\s*(.+?)\s*$", re.DOTALL)
        def extract_gsm8k_answer(answer_text):
            match = _FINAL_ANSWER.search(answer_text)
            if match is None:
                raise ValueError("no '#### N' final answer")
            return match.group(1).strip().replace(",", "")
    """,
    # the notebook's other way: rpartition splits at the last marker
    "rpartition": """
        def extract_gsm8k_answer(answer_text):
            head, sep, tail = answer_text.rpartition("####")
            if not sep:
                raise ValueError("no '#### N' in the text")
            return tail.strip().replace(",", "")
    """,
    "split_take_last": """
        def extract_gsm8k_answer(answer_text):
            parts = answer_text.split("####")
            if len(parts) < 2:
                raise ValueError("no final answer")
            answer = parts[-1].strip()
            return "".join(ch for ch in answer if ch != ",")
    """,
    "rfind_and_slice": """
        def extract_gsm8k_answer(answer_text):
            cut = answer_text.rfind("####")
            if cut == -1:
                raise ValueError("the text has no '####' line")
            return answer_text[cut + len("####"):].strip().replace(",", "")
    """,
    # every marker's tail (a tail stops before the next marker); the last one is the answer
    "findall_tails_dotall": r"""
        import re
        def extract_gsm8k_answer(answer_text):
            tails = re.findall(r"####((?:(?!####).)*)", answer_text, flags=re.DOTALL)
            if not tails:
                raise ValueError("no '#### N'")
            return re.sub(",", "", tails[-1].strip())
    """,
}

test_correct_version_earns_full_marks, test_mistake_loses_its_points = corpus_tests(SUITE, CORRECT)
test_each_version_holds_on_many_draws = many_draws_test(SUITE, CORRECT)
