"""Hidden cases of `kl_k1(policy_log_probs, ref_log_probs) -> (...)`: the per-token k1 estimate
-log r = log pi - log pi_ref (r = pi_ref / pi), on log ratios of either sign, near r = 1, up to
|log r| = 20, for log-probs near -110, in float32 and float64, on 1-d, 2-d, 3-d and empty shapes.

Outputs: k1 per token, the gradients of a weighted sum of it (fixed random weights) with respect
to both log-prob inputs (the weights, and minus the weights), and whether the inputs were left
unchanged.

Every case draws log r first and puts both log-probs at or below 0 around it; no case has
log r = 0 everywhere (k1 would be exactly 0 there: a scale that leaves no tolerance).

What the cases are built to catch:

- `positive_log_ratio_*` and `negative_log_ratio_*` (and every other case): the sign flipped
  (log r in the place of -log r), which is k1 of the other direction;
- `log_probs_near_minus_110_float32_*`: -log r from the probabilities, log(exp(policy) /
  exp(ref)), which is log(0 / 0) = NaN once exp underflows (below about -104 in float32);
- `near_r_equal_1_float32_*` (|log r| from 1e-4 to 1e-3): the same round trip through exp and
  log where it does not underflow, which keeps only the first digits of a small log r;
- `log_ratio_pm20_float32_*`: a clamp of log r;
- the gradients: a detached policy (or reference) log-prob, whose gradient is then missing;
- `float64_*`: float64 computed in float32 (or returned as float32);
- `no_grad_inputs_*` (`inputs_unchanged`): an in-place subtraction on the caller's log-probs
  (on inputs that require grad, autograd refuses it: every other case fails);
- the shapes (`vector_1d_*`, `3d_*`, `T1_*`, `empty_*`, `B8_T128_*`): a reduction (a mean over
  tokens) or a reshape that loses the input's shape.
"""

from __future__ import annotations

import torch

GRADED = "kl_k1"


def make_inputs(gen: torch.Generator) -> list[tuple[str, dict]]:
    from ._log_ratio_cases import Draw, common_cases  # grader side only (a harness leaves make_inputs out)

    d = Draw(gen)
    pm20 = d.uniform(4, 10, low=-20.0, high=20.0)
    pm20[0, 0], pm20[0, 1] = 20.0, -20.0
    return common_cases(d) + [("log_ratio_pm20_float32_4x10", d.case(pm20))]


def call(fn, inputs: dict) -> dict:
    policy = inputs["policy_log_probs"].clone().requires_grad_(inputs["grad"])
    ref = inputs["ref_log_probs"].clone().requires_grad_(inputs["grad"])
    before = (policy.detach().clone(), ref.detach().clone())
    kl = fn(policy, ref)
    result = {"kl": kl, "inputs_unchanged": bool(torch.equal(policy.detach(), before[0])
                                                 and torch.equal(ref.detach(), before[1]))}
    if inputs["grad"]:
        (kl * inputs["weights"].to(kl.dtype)).sum().backward()
        result["grad_policy_log_probs"] = policy.grad
        result["grad_ref_log_probs"] = ref.grad
    return result
