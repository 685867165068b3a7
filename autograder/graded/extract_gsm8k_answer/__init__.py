"""How the judge calls `extract_gsm8k_answer` on a hidden case: `call` (fresh copies of the case's
inputs in, named outputs out) and its settings. Public: a student kit and the grading sandbox hold
this file; the cases, the correct versions and the known mistakes are grader.py's.
"""

from __future__ import annotations

GRADED = "extract_gsm8k_answer"


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
