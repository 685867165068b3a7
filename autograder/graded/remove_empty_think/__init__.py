"""How the judge calls `remove_empty_think(targets, keep_prob, generator) -> list[str]` on a hidden
case: `call` (fresh copies of the case's inputs in, named outputs out) and its settings. Public: a
student kit and the grading sandbox hold this file; the cases, the correct versions and the known
mistakes are grader.py's.
"""

from __future__ import annotations

import torch

GRADED = "remove_empty_think"


def call(fn, inputs: dict) -> dict:
    generator = torch.Generator().manual_seed(inputs["seed"])
    targets = list(inputs["targets"])
    if inputs["expect_error"]:
        try:
            fn(targets, inputs["keep_prob"], generator)
        except Exception as e:  # noqa: BLE001 - which exception is the output
            return {"raises": "ValueError" if isinstance(e, ValueError) else "other"}
        return {"raises": None}
    out = fn(targets, inputs["keep_prob"], generator)
    return {"targets": out, "next_draws": torch.rand(3, generator=generator)}
