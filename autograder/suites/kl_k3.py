"""Hidden cases of `kl_k3(policy_log_probs, ref_log_probs) -> (...)`: the per-token k3 estimate
r - log r - 1 with r = pi_ref / pi (log r = ref_log_probs - policy_log_probs), on log ratios of
either sign, near r = 1, up to |log r| = 20, for log-probs near -110, in float32 and float64,
on 1-d, 2-d, 3-d and empty shapes.

Outputs: k3 per token, the gradients of a weighted sum of it (fixed random weights) with respect
to both log-prob inputs (d k3 / d log pi_ref = r - 1, d k3 / d log pi = 1 - r), and whether the
inputs were left unchanged.

Every case draws log r first and puts both log-probs at or below 0 around it; no case has
log r = 0 everywhere (k3 and its gradient would be exactly 0 there: a scale that leaves no
tolerance).

What the cases are built to catch:

- `near_r_equal_1_float32_*` (|log r| from 1e-4 to 1e-3): exp(log r) - 1 - log r in float32,
  which loses the value (about (log r)^2 / 2, 5e-9 to 5e-7) to the rounding of exp near 1
  (6e-8); expm1(log r) - log r, or float64 inside, keeps it;
- `log_ratio_up_to_20_*`, `log_ratio_down_to_minus_20_*`, `log_ratio_pm20_float64_*`: a clamp
  of log r (to 10, say), an overflow, and, on the negative side (values about |log r| - 1,
  which the positive side's e^20 would otherwise dwarf), the ratio inverted (pi / pi_ref);
- `log_probs_near_minus_110_float32_*`: r as exp(ref_log_probs) / exp(policy_log_probs), which
  is 0 / 0 = NaN once exp underflows (below about -104 in float32);
- `mixed_signs_*`, `positive_log_ratio_*`, `negative_log_ratio_*`: the ratio inverted, the -1
  dropped, k2 or k1 in the place of k3, a wrong sign of the gradient;
- `float64_*`: float64 computed in float32 (or returned as float32);
- `no_grad_inputs_*` (`inputs_unchanged`): an in-place operation on the caller's log-probs;
- the shapes (`vector_1d_*`, `3d_*`, `T1_*`, `empty_*`, `B8_T128_*`): a reduction (a mean over
  tokens) or a reshape that loses the input's shape.
"""

from __future__ import annotations

import torch

GRADED = "kl_k3"


def make_inputs(gen: torch.Generator) -> list[tuple[str, dict]]:
    from ._log_ratio_cases import Draw, common_cases  # grader side only (a harness leaves make_inputs out)

    d = Draw(gen)
    up_to_20 = d.uniform(4, 10, low=-20.0, high=20.0)
    up_to_20[0, 0], up_to_20[0, 1] = 20.0, -20.0
    up_to_20[1, :3] = d.spread(3, scale=0.01)  # small ones beside the large
    down_to_minus_20 = d.uniform(3, 8, low=-20.0, high=-5.0)
    down_to_minus_20[0, 0] = -20.0
    pm20 = d.uniform(3, 8, low=-20.0, high=20.0)
    pm20[0, 0], pm20[-1, -1] = 20.0, -20.0
    return common_cases(d) + [
        ("log_ratio_up_to_20_float32_4x10", d.case(up_to_20)),
        ("log_ratio_down_to_minus_20_float32_3x8", d.case(down_to_minus_20)),
        ("log_ratio_pm20_float64_3x8", d.case(pm20, dtype=torch.float64)),
    ]


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
