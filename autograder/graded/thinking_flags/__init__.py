"""How the judge calls `thinking_flags(n, thinking_ratio, generator) -> list[bool]` on a hidden case:
`call` (fresh copies of the case's inputs in, named outputs out) and its settings. Public: a student
kit and the grading sandbox hold this file; the cases, the correct versions and the known mistakes
are grader.py's.
"""

from __future__ import annotations

import torch

GRADED = "thinking_flags"


def call(fn, inputs: dict) -> dict:
    generator = torch.Generator().manual_seed(inputs["seed"])
    if inputs["expect_error"]:
        try:
            fn(inputs["n"], inputs["thinking_ratio"], generator)
        except Exception as e:  # noqa: BLE001 - which exception is the output
            return {"raises": "ValueError" if isinstance(e, ValueError) else "other"}
        return {"raises": None}
    flags = fn(inputs["n"], inputs["thinking_ratio"], generator)
    return {"flags": flags, "next_draws": torch.rand(3, generator=generator)}
