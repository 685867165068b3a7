"""gsm8k_to_r1_zero (notebook 01): the reference's contract, correct versions that earn full marks
through the real judge, and realistic mistakes that lose them (CONTRIBUTING.md, "Adding a graded
function").

A student's cell calls the student's own `extract_gsm8k_answer` (the course_lib one is a stub
while assignment 01 is graded), so every version below defines it too."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autograder.mistakes.gsm8k_to_r1_zero import r1
from course_lib import gsm8k_to_r1_zero, r1_zero_prompt_template, r1_zero_reward_fn
from tests.helpers import PROPERTY_SETTINGS, corpus_tests, many_draws_test

SUITE = "gsm8k_to_r1_zero"


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


CORRECT = {
    "as_the_reference": r1(),
    # one rpartition gives both halves; the template filled in by hand
    "rpartition_both_halves": """
        from course_lib.gsm8k import r1_zero_prompt_template
        def extract_gsm8k_answer(answer_text):
            head, sep, tail = answer_text.rpartition("####")
            if not sep:
                raise ValueError("no '#### N'")
            return tail.strip().replace(",", "")
        def gsm8k_to_r1_zero(example, template=None):
            answer = extract_gsm8k_answer(example["answer"])
            reasoning = example["answer"].rpartition("####")[0].strip()
            prompt = (template if template is not None else r1_zero_prompt_template()).replace("{question}", example["question"])
            return {"prompt": prompt, "output": " " + reasoning + " </think> <answer> " + answer + " </answer>",
                    "ground_truth": answer}
    """,
    # one regular expression captures the reasoning (greedy, so up to the last marker) and the answer
    "one_regex_two_groups": r"""
        import re
        from course_lib.gsm8k import format_r1_zero_prompt
        RECORD = re.compile(r"(.*)####\s*(.+?)\s*$", re.DOTALL)
        def extract_gsm8k_answer(answer_text):
            m = RECORD.match(answer_text)
            if m is None:
                raise ValueError("no final answer")
            return m.group(2).replace(",", "")
        def gsm8k_to_r1_zero(example, template=None):
            m = RECORD.match(example["answer"])
            if m is None:
                raise ValueError("no final answer")
            truth = extract_gsm8k_answer(example["answer"])
            return {"prompt": format_r1_zero_prompt(example["question"], template),
                    "output": f" {m.group(1).strip()} </think> <answer> {truth} </answer>",
                    "ground_truth": truth}
    """,
    # str.format on the template (it has no other braces), the reasoning from split
    "split_and_format": """
        from course_lib.gsm8k import r1_zero_prompt_template
        def extract_gsm8k_answer(answer_text):
            pieces = answer_text.split("####")
            if len(pieces) == 1:
                raise ValueError("no final answer")
            return pieces[-1].strip().replace(",", "")
        def gsm8k_to_r1_zero(example, template=None):
            truth = extract_gsm8k_answer(example["answer"])  # raises first on a bad record
            pieces = example["answer"].split("####")
            reasoning = "####".join(pieces[:-1]).strip()
            if template is None:
                template = r1_zero_prompt_template()
            output = " {} </think> <answer> {} </answer>".format(reasoning, truth)
            return dict(prompt=template.format(question=example["question"]), output=output, ground_truth=truth)
    """,
}

test_correct_version_earns_full_marks, test_mistake_loses_its_points = corpus_tests(SUITE, CORRECT)
test_each_version_holds_on_many_draws = many_draws_test(SUITE, CORRECT)
