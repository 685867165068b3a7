"""A case's inputs in another precision: cast up to float64 (`upcast`: what the truth is computed on),
moved by one unit of rounding (`perturb`: one measure of the rounding a correct computation can
show), and the precision a case carries (`case_precision`). Both the expected values
(`autograder.cases`) and the known mistakes' expected trees (`autograder.signatures`) are made
from these."""

from __future__ import annotations

import copy

import torch


def upcast(obj):
    """A copy of a case's inputs in float64: every floating tensor cast up (its values exactly
    kept), a floating torch.dtype setting becomes torch.float64; everything else unchanged."""
    if isinstance(obj, torch.Tensor):
        return obj.to(torch.float64) if obj.is_floating_point() else obj.clone()
    if isinstance(obj, torch.dtype):
        return torch.float64 if obj.is_floating_point else obj
    if isinstance(obj, dict):
        return {k: upcast(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(upcast(v) for v in obj)
    return copy.deepcopy(obj)


def case_precision(inputs) -> torch.dtype:
    """float64 when every floating tensor of the inputs is float64 (a float64 case), else float32:
    the precision a Python number computed from them carries."""
    dtypes = set()

    def walk(obj):
        if isinstance(obj, torch.Tensor):
            if obj.is_floating_point():
                dtypes.add(obj.dtype)
        elif isinstance(obj, dict):
            for v in obj.values():
                walk(v)
        elif isinstance(obj, (list, tuple)):
            for v in obj:
                walk(v)

    walk(inputs)
    return torch.float64 if dtypes == {torch.float64} else torch.float32


def perturb(obj, gen: torch.Generator):
    """A copy of a case's inputs with every float32 and float64 tensor moved by one unit of its
    own rounding, up or down at random (x * (1 +- eps), zeros, signs and infinities kept;
    bfloat16 and float16 inputs are exact values that a correct computation upcasts, so they stay
    as they are): the reference on
    these inputs differs from it on the inputs as drawn by what rounding the inputs once does to
    the outputs, the error any correct computation of the case can show (a sum that cancels to a
    small value among large terms, for one)."""
    if isinstance(obj, torch.Tensor) and obj.dtype in (torch.float32, torch.float64):
        signs = torch.randint(0, 2, obj.shape, generator=gen).to(torch.float64) * 2 - 1
        moved = obj.to(torch.float64) * (1 + signs * torch.finfo(obj.dtype).eps)
        return torch.where(torch.isfinite(obj), moved.to(obj.dtype), obj)
    if isinstance(obj, dict):
        return {k: perturb(v, gen) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(perturb(v, gen) for v in obj)
    return copy.deepcopy(obj)
