"""Hidden cases of `gsm8k_to_r1_zero` (notebook 01).

Beyond the visible checks: random arithmetic records, a custom prompt template, an answer with
thousands commas (the ground truth and the answer tag hold the bare number), reasoning with
surrounding whitespace, a record with two `####` lines (the reasoning is everything before the
last one, the answer what follows it), and a record without `#### N`, which must raise ValueError.
"""

import torch

GRADED = "gsm8k_to_r1_zero"
# each error case and the phrase of the reference's `Raises:` section that states it (tests/test_contracts.py)
RAISES = {"no_final_answer": "an answer without `#### N`"}
KEYS = ("prompt", "output", "ground_truth")


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


def call(fn, inputs: dict) -> dict:
    example = dict(inputs["example"])
    try:
        out = fn(example) if inputs["template"] is None else fn(example, inputs["template"])
    except ValueError:
        return {"raises_value_error": True}
    if not isinstance(out, dict):
        return {"returned a dict": False, "raises_value_error": False}
    return {**{k: out[k] for k in KEYS if k in out}, "raises_value_error": False}
