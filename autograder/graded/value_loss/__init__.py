"""How the judge calls `value_loss(values, old_values, returns, response_mask, cliprange_value) -> ()`
on a hidden case: `call` (fresh copies of the case's inputs in, named outputs out) and its settings.
Public: a student kit and the grading sandbox hold this file; the cases, the correct versions and
the known mistakes are grader.py's.
"""

from __future__ import annotations

GRADED = "value_loss"


def call(fn, inputs: dict) -> dict:
    values = inputs["values"].clone().requires_grad_()
    loss = fn(values, inputs["old_values"].clone(), inputs["returns"].clone(), inputs["response_mask"].clone(),
              inputs["cliprange_value"])
    loss.backward()
    return {"loss": loss, "grad_values": values.grad}
