"""How the judge calls `compute_entropy(logits) -> (...,)` on a hidden case: `call` (fresh copies of
the case's inputs in, named outputs out) and its settings. Public: a student kit and the grading
sandbox hold this file; the cases, the correct versions and the known mistakes are grader.py's.
"""

from __future__ import annotations

import torch

GRADED = "compute_entropy"


def call(fn, inputs: dict) -> dict:
    logits = inputs["logits"].clone()
    before = logits.clone()
    entropy = fn(logits)
    return {"entropy": entropy, "input_unchanged": bool(torch.equal(logits, before))}
