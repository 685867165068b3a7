"""How the judge calls `thinking_format_reward(completion, prefilled) -> float` on a hidden case:
`call` (fresh copies of the case's inputs in, named outputs out) and its settings. Public: a student
kit and the grading sandbox hold this file; the cases, the correct versions and the known mistakes
are grader.py's.
"""

from __future__ import annotations

GRADED = "thinking_format_reward"
TRIPWIRE = ["thinking_format_reward", "split_reasoning"]


def call(fn, inputs: dict) -> dict:
    return {"rewards": [fn(str(c), bool(p)) for c, p in zip(inputs["completions"], inputs["prefilled"])]}
