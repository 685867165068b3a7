"""How the judge calls `compute_gae(rewards, values, response_mask, gamma, lam) -> (advantages,
returns)` on a hidden case: `call` (fresh copies of the case's inputs in, named outputs out) and its
settings. Public: a student kit and the grading sandbox hold this file; the cases, the correct
versions and the known mistakes are grader.py's.
"""

from __future__ import annotations

import torch

GRADED = "compute_gae"
TRIPWIRE = ["compute_gae"]


def call(fn, inputs: dict) -> dict:
    rewards = inputs["rewards"].clone()
    values = inputs["values"].clone()
    mask = inputs["response_mask"].clone()
    before = (rewards.clone(), values.clone(), mask.clone())
    advantages, returns = fn(rewards, values, mask, inputs["gamma"], inputs["lam"])
    unchanged = all(torch.equal(a, b) for a, b in zip((rewards, values, mask), before))
    return {"advantages": advantages, "returns": returns, "inputs_unchanged": unchanged}
