"""gsm8k_to_r1_zero (notebook 01): the reference's contract, correct versions that earn full marks
through the real judge, and realistic mistakes that lose them (CONTRIBUTING.md, "Adding a graded
function").

A student's cell calls the student's own `extract_gsm8k_answer` (the course_lib one is a stub
while assignment 01 is graded), so every version below defines it too."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

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


# ---------------------------------------------------------------- correct versions and mistakes
R1_BASE = r"""
    import re
    from course_lib.gsm8k import format_r1_zero_prompt, r1_zero_prompt_template
    def extract_gsm8k_answer(answer_text):
        m = re.search(r"####(?!.*####)\s*(.+?)\s*$", answer_text, re.DOTALL)
        if m is None:
            raise ValueError("no answer")
        return m.group(1).strip().replace(",", "")
    def gsm8k_to_r1_zero(example, template=None):
        text = example["answer"]
        cut = text.rfind("####")
        if cut < 0:
            raise ValueError("no answer")
        truth = extract_gsm8k_answer(text)
        reasoning = text[:cut].strip()
        QUESTION = example["question"]
        OUTPUT = f" {reasoning} </think> <answer> {truth} </answer>"
        return {"prompt": format_r1_zero_prompt(QUESTION, TEMPLATE), "output": OUTPUT, "ground_truth": TRUTH}
"""


def r1(question='example["question"]', output='f" {reasoning} </think> <answer> {truth} </answer>"', template="template",
       truth="truth", reasoning="text[:cut].strip()", check=True):
    """The reference's way with one part replaced (a mistake is one such replacement)."""
    src = R1_BASE.replace('QUESTION = example["question"]', f"QUESTION = {question}")
    src = src.replace('OUTPUT = f" {reasoning} </think> <answer> {truth} </answer>"', f"OUTPUT = {output}")
    src = src.replace("TEMPLATE)", f"{template})").replace("TRUTH}", f"{truth}}}")
    src = src.replace("reasoning = text[:cut].strip()", f"reasoning = {reasoning}")
    if not check:
        src = src.replace("""        if cut < 0:
            raise ValueError("no answer")
""", "").replace("""        if m is None:
            raise ValueError("no answer")
        return""", """        if m is None:
            return ""
        return""")
    return src


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
MISTAKES = {
    "question_stripped": (r1(question='example["question"].strip()'), ["whitespace_around_reasoning"]),
    "no_space_before_the_reasoning": (r1(output='f"{reasoning} </think> <answer> {truth} </answer>"'), ["arith_record_0"]),
    "hash_line_left_in_the_reasoning": (r1(reasoning="text.strip()"), ["arith_record_0"]),
    "template_ignored": (r1(template="None"), ["custom_template"]),
    "commas_in_the_ground_truth": (r1(truth="text[cut + 4:].strip()"), ["thousands_commas"]),
    "reasoning_not_stripped": (r1(reasoning="text[:cut]"), ["whitespace_around_reasoning"]),
    "no_value_error": (r1(check=False), ["no_final_answer"]),
    "cut_at_the_first_marker": (r1(reasoning='text[:text.find("####")].strip()'), ["two_markers"]),
    # the tags glued together read differently from the example inside the prompt
    "no_spaces_around_the_tags": (r1(output='f" {reasoning}</think><answer>{truth}</answer>"'), ["arith_record_0"]),
}

test_correct_version_earns_full_marks, test_mistake_loses_its_points = corpus_tests(SUITE, CORRECT, MISTAKES)
test_each_version_holds_on_many_draws = many_draws_test(SUITE, CORRECT, MISTAKES)
