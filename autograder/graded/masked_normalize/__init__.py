"""How the judge calls `masked_normalize(tensor, mask, dim=None, normalize_constant=1.0)` on a hidden
case: `call` (fresh copies of the case's inputs in, named outputs out) and its settings. Public: a
student kit and the grading sandbox hold this file; the cases, the correct versions and the known
mistakes are grader.py's.
"""

from __future__ import annotations

import torch

GRADED = "masked_normalize"


def call(fn, inputs: dict) -> dict:
    tensor = inputs["tensor"].clone().requires_grad_()
    kwargs = {"dim": inputs["dim"]}
    if inputs["normalize_constant"] is not None:
        kwargs["normalize_constant"] = inputs["normalize_constant"]
    out = fn(tensor, inputs["mask"].clone(), **kwargs)
    weights = torch.linspace(-1.0, 2.0, out.numel(), dtype=out.dtype).view(out.shape)
    (out * weights).sum().backward()
    return {"out": out, "grad": tensor.grad}
