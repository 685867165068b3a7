"""How the judge calls `importance_weights(train_log_probs, rollout_log_probs, response_mask, mode,
cap, aggregate="sum") -> (B, T)` on a hidden case: `call` (fresh copies of the case's inputs in,
named outputs out) and its settings. Public: a student kit and the grading sandbox hold this file;
the cases, the correct versions and the known mistakes are grader.py's.
"""

from __future__ import annotations

import torch

GRADED = "importance_weights"


def call(fn, inputs: dict) -> dict:
    train = inputs["train_log_probs"].clone().requires_grad_()
    rollout = inputs["rollout_log_probs"].clone().requires_grad_()
    mask = inputs["response_mask"].clone()
    args = (train, rollout, mask, inputs["mode"], inputs["cap"])
    if inputs["expect_error"]:
        try:
            fn(*args, **inputs["kwargs"])
        except Exception as e:  # noqa: BLE001 - which exception is the output
            return {"raises": "ValueError" if isinstance(e, ValueError) else "other"}
        return {"raises": None}
    before = (train.detach().clone(), rollout.detach().clone(), mask.clone())
    w = fn(*args, **inputs["kwargs"])
    unchanged = all(torch.equal(a, b) for a, b in zip((train.detach(), rollout.detach(), mask), before))
    detached = not (isinstance(w, torch.Tensor) and w.requires_grad)
    return {"weights": w, "detached": detached, "inputs_unchanged": unchanged}
