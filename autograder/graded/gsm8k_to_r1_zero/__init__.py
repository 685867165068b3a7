"""How the judge calls `gsm8k_to_r1_zero` on a hidden case: `call` (fresh copies of the case's inputs
in, named outputs out) and its settings. Public: a student kit and the grading sandbox hold this
file; the cases, the correct versions and the known mistakes are grader.py's.
"""

from __future__ import annotations

GRADED = "gsm8k_to_r1_zero"
KEYS = ("prompt", "output", "ground_truth")


def call(fn, inputs: dict) -> dict:
    example = dict(inputs["example"])
    try:
        out = fn(example) if inputs["template"] is None else fn(example, inputs["template"])
    except ValueError:
        return {"raises_value_error": True}
    if not isinstance(out, dict):
        return {"returned a dict": False, "raises_value_error": False}
    return {**{k: out[k] for k in KEYS if k in out}, "raises_value_error": False}
