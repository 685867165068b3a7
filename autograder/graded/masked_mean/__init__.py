"""How the judge calls `masked_mean(tensor, mask, dim=None)` on a hidden case: `call` (fresh copies of
the case's inputs in, named outputs out) and its settings. Public: a student kit and the grading
sandbox hold this file; the cases, the correct versions and the known mistakes are grader.py's.
"""

from __future__ import annotations

import torch

GRADED = "masked_mean"


def call(fn, inputs: dict) -> dict:
    tensor = inputs["tensor"].clone().requires_grad_()
    mask = inputs["mask"].clone()
    out = fn(tensor, mask) if inputs["dim"] == "default" else fn(tensor, mask, dim=inputs["dim"])
    result = {"mean": out}
    if not bool(torch.isnan(out.detach()).any()):
        weights = torch.linspace(-1.0, 2.0, out.numel(), dtype=out.dtype).view(out.shape)
        (out * weights).sum().backward()
        result["grad"] = tensor.grad
    return result
