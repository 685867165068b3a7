"""How the judge calls `mismatch_report(train_log_probs, rollout_log_probs, response_mask) -> dict` on
a hidden case: `call` (fresh copies of the case's inputs in, named outputs out) and its settings.
Public: a student kit and the grading sandbox hold this file; the cases, the correct versions and
the known mistakes are grader.py's.
"""

from __future__ import annotations

import torch

GRADED = "mismatch_report"
KEYS = ("mean_diff", "mean_abs", "std_abs", "p95_abs", "max_abs", "frac_outside", "mean_k3", "seq_log_ratio",
        "seq_quantiles")


def call(fn, inputs: dict) -> dict:
    train = inputs["train_log_probs"].clone()
    rollout = inputs["rollout_log_probs"].clone()
    mask = inputs["response_mask"].clone()
    if inputs["expect_error"]:
        try:
            fn(train, rollout, mask)
        except Exception as e:  # noqa: BLE001 - which exception is the output
            return {"raises": "ValueError" if isinstance(e, ValueError) else "other"}
        return {"raises": None}
    before = (train.clone(), rollout.clone(), mask.clone())
    report = fn(train, rollout, mask)
    result = {k: report.get(k) for k in KEYS} if isinstance(report, dict) else {"report": report}
    result["inputs_unchanged"] = all(_same(a, b) for a, b in zip((train, rollout, mask), before))
    return result


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal values, with NaN equal to NaN (torch.equal says a tensor holding NaN differs from its copy)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if not a.is_floating_point():
        return torch.equal(a, b)
    return torch.equal(a.isnan(), b.isnan()) and torch.equal(a.nan_to_num(0.0), b.nan_to_num(0.0))
