"""How the judge calls `split_reasoning(completion, prefilled) -> (reasoning, answer)` on a hidden
case: `call` (fresh copies of the case's inputs in, named outputs out) and its settings. Public: a
student kit and the grading sandbox hold this file; the cases, the correct versions and the known
mistakes are grader.py's.
"""

from __future__ import annotations

GRADED = "split_reasoning"


def call(fn, inputs: dict) -> dict:
    return {"splits": [fn(str(c), bool(p)) for c, p in zip(inputs["completions"], inputs["prefilled"])]}
