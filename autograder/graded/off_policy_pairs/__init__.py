"""How the judge calls `off_policy_pairs(examples) -> list[dict]` on a hidden case: `call` (fresh
copies of the case's inputs in, named outputs out) and its settings. Public: a student kit and the
grading sandbox hold this file; the cases, the correct versions and the known mistakes are
grader.py's.
"""

from __future__ import annotations

GRADED = "off_policy_pairs"


def call(fn, inputs: dict) -> dict:
    examples = [dict(e) for e in inputs["examples"]]
    if inputs["expect_error"]:
        try:
            fn(examples)
        except Exception as e:  # noqa: BLE001 - which exception is the output
            return {"raises": "ValueError" if isinstance(e, ValueError) else "other"}
        return {"raises": None}
    return {"pairs": fn(examples)}
