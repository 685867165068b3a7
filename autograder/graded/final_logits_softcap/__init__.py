"""How the judge calls `final_logits_softcap(logits, cap) -> (..., V)` on a hidden case: `call` (fresh
copies of the case's inputs in, named outputs out) and its settings. Public: a student kit and the
grading sandbox hold this file; the cases, the correct versions and the known mistakes are
grader.py's.
"""

from __future__ import annotations

import torch

GRADED = "final_logits_softcap"


def call(fn, inputs: dict) -> dict:
    logits = inputs["logits"].clone().requires_grad_(inputs["grad"])
    before = logits.detach().clone()
    capped = fn(logits, inputs["cap"])
    result = {"capped": capped, "input_unchanged": bool(torch.equal(logits.detach(), before))}
    if inputs["grad"]:
        (capped * inputs["weights"].to(capped.dtype)).sum().backward()
        result["grad_logits"] = logits.grad
    return result
