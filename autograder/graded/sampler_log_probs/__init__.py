"""How the judge calls `sampler_log_probs(logits, tokens, temperature=1.0, top_k=None, top_p=None,
renormalize=True) -> (...)` on a hidden case: `call` (fresh copies of the case's inputs in, named
outputs out) and its settings. Public: a student kit and the grading sandbox hold this file; the
cases, the correct versions and the known mistakes are grader.py's.
"""

from __future__ import annotations

import torch

GRADED = "sampler_log_probs"


def call(fn, inputs: dict) -> dict:
    logits = inputs["logits"].clone()
    tokens = inputs["tokens"].clone()
    if inputs["expect_error"]:
        try:
            fn(logits, tokens, **inputs["kwargs"])
        except Exception as e:  # noqa: BLE001 - which exception is the output
            return {"raises": "ValueError" if isinstance(e, ValueError) else "other"}
        return {"raises": None}
    before = (logits.clone(), tokens.clone())
    out = fn(logits, tokens, **inputs["kwargs"])
    unchanged = torch.equal(logits, before[0]) and torch.equal(tokens, before[1])
    return {"log_probs": out, "inputs_unchanged": unchanged}
