"""The grader's side of `extract_gsm8k_answer` (notebook 01): how its hidden cases are drawn, the
correct versions that must earn full marks and the known mistakes that must lose them, each with the
sentence a student reads (`autograder.mistakes`). Never in a student kit or the grading sandbox,
which hold the folder's __init__.py only.

Hidden cases of `extract_gsm8k_answer` (notebook 01).

Beyond the visible checks: thousands commas (several groups), negative and decimal answers,
no space or extra spaces and newlines around the answer, calculator notes full of other
numbers, a text with two `####` lines (the answer follows the last one, the marker at which
`gsm8k_to_r1_zero` cuts the reasoning), and a text without `#### N`, which must raise ValueError.
"""

from __future__ import annotations

import torch

from autograder.mistakes import Mistake


# ---------------------------------------------------------------- the hidden cases
# each error case and the phrase of the reference's `Raises:` section that states it (tests/test_contracts.py)
RAISES = {"no_final_answer": "no `####` followed by an answer"}


def make_inputs(gen: torch.Generator) -> list[tuple[str, dict]]:
    from course_lib import load_problems

    problems = load_problems("arith", "test")
    idx = torch.randperm(len(problems), generator=gen)[:5].tolist()
    n = int(torch.randint(1_000, 10**8, (1,), generator=gen))
    k = int(torch.randint(2, 99, (1,), generator=gen))
    return [
        ("arith_answers", {"texts": [problems[i]["answer"] for i in idx]}),
        ("thousands_commas", {"texts": [f"She pays {k} * 40 = <<{k}*40={k * 40}>>{k * 40}.\n#### {n:,}", "#### 1,080"]}),
        ("negative_and_decimal", {"texts": [f"The change is -{k}.\n#### -{k}", f"Each gets {k}/4 = {k / 4}.\n#### {k / 4}"]}),
        ("spacing", {"texts": [f"####{k}", f"It is {k}.\n#### {k}  \n", f"#### \t{n}\n\n"]}),
        ("other_numbers_first", {"texts": [f"{n} - {k} = <<{n}-{k}={n - k}>>{n - k}\n{k} * 2 = {2 * k}\n#### {n - k}"]}),
        ("two_markers_the_last_counts", {"texts": [f"#### {k}\nCorrected: {k} + 1 = {k + 1}\n#### {k + 1}",
                                                   f"{n} #### {k}\n#### {n:,}"]}),
        ("no_final_answer", {"texts": [f"I believe the result is {k} (no marker)."]}),
    ]


# ---------------------------------------------------------------- the correct versions
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


# ---------------------------------------------------------------- the known mistakes
MISTAKES = {
    # "1,080" is not "1080" (and without the look-ahead `.+?` starts at the first marker)
    "keeps_commas": Mistake(
        'keeps the thousands commas ("1,080" is not "1080") and reads from the first #### marker',
        r"""
        import re
        def extract_gsm8k_answer(answer_text):
            m = re.search(r"####\s*(.+?)\s*$", answer_text, re.DOTALL)
            if m is None:
                raise ValueError("no answer")
            return m.group(1).strip()
    """,
        ["thousands_commas", "two_markers_the_last_counts"]),
    "no_strip": Mistake(
        "does not strip the spaces and newlines around the answer",
        """
        def extract_gsm8k_answer(answer_text):
            if "####" not in answer_text:
                raise ValueError("no answer")
            return answer_text.split("####")[-1].replace(",", "")
    """,
        ["spacing", "arith_answers"]),
    # the last number of a record is its answer here, but a text without '#### N' still gives one
    "last_number_of_the_text": Mistake(
        "returns the last number of the text, so a text without '#### N' still gives an answer instead of ValueError",
        r"""
        import re
        def extract_gsm8k_answer(answer_text):
            numbers = re.findall(r"-?[\d,]*\.?\d+", answer_text)
            if not numbers:
                raise ValueError("no answer")
            return numbers[-1].replace(",", "")
    """,
        ["no_final_answer"]),
    "empty_string_instead_of_value_error": Mistake(
        "returns an empty string for a text without '#### N' instead of raising ValueError",
        r"""
        import re
        def extract_gsm8k_answer(answer_text):
            m = re.search(r"####(?!.*####)\s*(.+?)\s*$", answer_text, re.DOTALL)
            return "" if m is None else m.group(1).strip().replace(",", "")
    """,
        ["no_final_answer"]),
    # `.+?` from the first marker on swallows the rest of the text, second marker included
    "first_marker": Mistake(
        "reads from the first #### marker to the end, second marker included, instead of after the last one",
        r"""
        import re
        def extract_gsm8k_answer(answer_text):
            m = re.search(r"####\s*(.+?)\s*$", answer_text, re.DOTALL)
            if m is None:
                raise ValueError("no answer")
            return m.group(1).strip().replace(",", "")
    """,
        ["two_markers_the_last_counts"]),
    "digits_only": Mistake(
        "keeps digits and commas only, so a minus sign or a decimal point is lost",
        r"""
        import re
        def extract_gsm8k_answer(answer_text):
            m = re.search(r"####\s*([\d,]+)", answer_text)
            if m is None:
                raise ValueError("no answer")
            return m.group(1).replace(",", "")
    """,
        ["negative_and_decimal"]),
    # a number is not the string: "12.25" becomes "12", "12.0" becomes "12"
    "converted_to_int": Mistake(
        'converts the answer to an int: "12.25" becomes "12"',
        """
        def extract_gsm8k_answer(answer_text):
            head, sep, tail = answer_text.rpartition("####")
            if not sep:
                raise ValueError("no answer")
            return str(int(float(tail.strip().replace(",", ""))))
    """,
        ["negative_and_decimal"]),
    # split(maxsplit=1) at the first marker: the answer of a corrected record is the old one
    "split_at_the_first_marker": Mistake(
        "splits at the first #### marker, so a record with two markers gives the first answer, not the last",
        """
        def extract_gsm8k_answer(answer_text):
            if "####" not in answer_text:
                raise ValueError("no answer")
            return answer_text.split("####", 1)[1].split("\\n")[0].strip().replace(",", "")
    """,
        ["two_markers_the_last_counts"]),
}
