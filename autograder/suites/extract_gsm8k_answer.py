"""Hidden cases of `extract_gsm8k_answer` (notebook 01).

Beyond the visible checks: thousands commas (several groups), negative and decimal answers,
no space or extra spaces and newlines around the answer, calculator notes full of other
numbers, a text with two `####` lines (the answer follows the last one, the marker at which
`gsm8k_to_r1_zero` cuts the reasoning), and a text without `#### N`, which must raise ValueError.
"""

import torch

GRADED = "extract_gsm8k_answer"
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


def call(fn, inputs: dict) -> dict:
    answers, raised = [], []
    for text in inputs["texts"]:
        try:
            answers.append(fn(str(text)))
            raised.append(False)
        except ValueError:
            answers.append(None)
            raised.append(True)
    return {"answers": answers, "raises_value_error": raised}
