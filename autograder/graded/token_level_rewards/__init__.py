"""How the judge calls `token_level_rewards(scores, response_mask, kl=None, kl_coef=0.0) -> Tensor` on
a hidden case: `call` (fresh copies of the case's inputs in, named outputs out) and its settings.
Public: a student kit and the grading sandbox hold this file; the cases, the correct versions and
the known mistakes are grader.py's.
"""

from __future__ import annotations

import torch

GRADED = "token_level_rewards"
TRIPWIRE = ["token_level_rewards"]


def call(fn, inputs: dict) -> dict:
    scores = inputs["scores"].clone()
    mask = inputs["response_mask"].clone()
    kl = None if inputs["kl"] is None else inputs["kl"].clone()
    before = [t.clone() for t in (scores, mask, kl) if t is not None]
    if inputs["kl_coef"] == "default":
        rewards = fn(scores, mask) if kl is None else fn(scores, mask, kl=kl)
    else:
        rewards = fn(scores, mask, kl=kl, kl_coef=inputs["kl_coef"])
    after = [t for t in (scores, mask, kl) if t is not None]
    return {"rewards": rewards, "inputs_unchanged": all(torch.equal(a, b) for a, b in zip(after, before))}
