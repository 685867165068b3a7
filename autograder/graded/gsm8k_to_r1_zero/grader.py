"""The grader's side of `gsm8k_to_r1_zero` (notebook 01): how its hidden cases are drawn, the correct
versions that must earn full marks and the known mistakes that must lose them, each with the
sentence a student reads (`autograder.mistakes`). Never in a student kit or the grading sandbox,
which hold the folder's __init__.py only.

Hidden cases of `gsm8k_to_r1_zero` (notebook 01).

Beyond the visible checks: random arithmetic records, a custom prompt template, an answer with
thousands commas (the ground truth and the answer tag hold the bare number), reasoning with
surrounding whitespace, a record with two `####` lines (the reasoning is everything before the
last one, the answer what follows it), and a record without `#### N`, which must raise ValueError.

A student's cell calls the student's own `extract_gsm8k_answer` (the course_lib one is a stub
while assignment 01 is graded), so every version below defines it too.
"""

from __future__ import annotations

import torch

from autograder.mistakes import Mistake


# ---------------------------------------------------------------- the hidden cases
# each error case and the phrase of the reference's `Raises:` section that states it (tests/test_contracts.py)
RAISES = {"no_final_answer": "an answer without `#### N`"}


def make_inputs(gen: torch.Generator) -> list[tuple[str, dict]]:
    from course_lib import load_problems

    problems = load_problems("arith", "test")
    idx = torch.randperm(len(problems), generator=gen)[:3].tolist()
    k = int(torch.randint(2, 50, (1,), generator=gen))
    n = k * 1_250
    return [
        *[(f"arith_record_{j}", {"example": dict(problems[i]), "template": None}) for j, i in enumerate(idx)],
        ("custom_template", {"example": dict(problems[idx[0]]), "template": "Q: {question}\nA: <think>"}),
        ("thousands_commas", {"example": {"question": f"What is {k} times 1250?",
                                          "answer": f"{k} * 1250 = <<{k}*1250={n}>>{n}\n#### {n:,}"}, "template": None}),
        ("whitespace_around_reasoning", {"example": {"question": "  What is 3 + 4?  ",
                                                     "answer": "\n  3 + 4 = 7  \n\n#### 7\n"}, "template": None}),
        ("two_markers", {"example": {"question": f"What is {k} + 1?",
                                     "answer": f"{k} + 1 = {k + 2}\n#### {k + 2}\nNo: {k} + 1 = {k + 1}\n#### {k + 1}"},
                         "template": None}),
        ("no_final_answer", {"example": {"question": "What is 2 + 2?", "answer": "It is 4."}, "template": None}),
    ]


# ---------------------------------------------------------------- the correct versions
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


# ---------------------------------------------------------------- the known mistakes
MISTAKES = {
    "question_stripped": Mistake(
        "strips the question before putting it in the prompt, where it goes in as it is",
        r1(question='example["question"].strip()'),
        ["whitespace_around_reasoning"]),
    "no_space_before_the_reasoning": Mistake(
        "leaves out the space before the reasoning in the output",
        r1(output='f"{reasoning} </think> <answer> {truth} </answer>"'),
        ["arith_record_0"]),
    "hash_line_left_in_the_reasoning": Mistake(
        "keeps the '#### N' line in the reasoning",
        r1(reasoning="text.strip()"),
        ["arith_record_0"]),
    "template_ignored": Mistake(
        "formats the prompt with the default template instead of the template it is given",
        r1(template="None"),
        ["custom_template"]),
    "commas_in_the_ground_truth": Mistake(
        "keeps the thousands commas in the ground truth",
        r1(truth="text[cut + 4:].strip()"),
        ["thousands_commas"]),
    "reasoning_not_stripped": Mistake(
        "does not strip the whitespace around the reasoning",
        r1(reasoning="text[:cut]"),
        ["whitespace_around_reasoning"]),
    "no_value_error": Mistake(
        "returns an empty answer for a record without '#### N' instead of raising ValueError",
        r1(check=False),
        ["no_final_answer"]),
    "cut_at_the_first_marker": Mistake(
        "cuts the reasoning at the first #### marker instead of the last",
        r1(reasoning='text[:text.find("####")].strip()'),
        ["two_markers"]),
    # the tags glued together read differently from the example inside the prompt
    "no_spaces_around_the_tags": Mistake(
        "glues the tags to the reasoning and the answer, unlike the format the prompt shows",
        r1(output='f" {reasoning}</think><answer>{truth}</answer>"'),
        ["arith_record_0"]),
    # notebook 01's visible check: "the calculator notes were dropped from the reasoning"
    "calculator_notes_dropped": Mistake(
        "removes the <<...>> calculator notes from the reasoning, which keeps them as the record has them",
        r1(reasoning='re.sub(r"<<[^>]*>>", "", text[:cut]).strip()'),
        ["arith_record_0", "thousands_commas"]),
}
