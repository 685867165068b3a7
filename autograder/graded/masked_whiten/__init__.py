"""How the judge calls `masked_whiten(values, mask, shift_mean=True) -> Tensor` on a hidden case:
`call` (fresh copies of the case's inputs in, named outputs out) and its settings. Public: a student
kit and the grading sandbox hold this file; the cases, the correct versions and the known mistakes
are grader.py's.
"""

from __future__ import annotations

import torch

GRADED = "masked_whiten"


def call(fn, inputs: dict) -> dict:
    values = inputs["values"].clone()
    before = values.clone()
    mask = inputs["mask"].clone()
    if inputs["shift_mean"] == "default":
        out = fn(values, mask)
    else:
        out = fn(values, mask, shift_mean=inputs["shift_mean"])
    return {"whitened": out, "values_unchanged": bool(torch.equal(values, before))}
