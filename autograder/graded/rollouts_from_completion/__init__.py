"""How the judge calls `rollouts_from_completion(reply, eos_token_id) -> list[dict]` on a hidden case:
`call` (fresh copies of the case's inputs in, named outputs out) and its settings. Public: a student
kit and the grading sandbox hold this file; the cases, the correct versions and the known mistakes
are grader.py's.
"""

from __future__ import annotations

GRADED = "rollouts_from_completion"


def call(fn, inputs: dict) -> dict:
    import copy

    reply = copy.deepcopy(inputs["reply"])
    if inputs["expect_error"]:
        try:
            fn(reply, inputs["eos_token_id"])
        except Exception as e:  # noqa: BLE001 - which exception is the output
            return {"raises": "ValueError" if isinstance(e, ValueError) else "other"}
        return {"raises": None}
    return {"samples": fn(reply, inputs["eos_token_id"])}
