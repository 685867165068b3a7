"""Hidden cases of `final_logits_softcap(logits, cap) -> (..., V)`: caps of several sizes and types,
logits far beyond the cap and far inside it, the cap switched off (None, 0, 0.0), float64, and the
gradient through the cap (1 - tanh^2(logits / cap)).

The magnitude case keeps one logit per row inside the cap: where every logit is far beyond it, the
float64 truth of the gradient is exactly 0 (tanh rounds to 1) while its exact value, which
2 * sigmoid(2x / c) - 1 computes in float32 (7.7e-22 at x / c = -25), is not; a gradient of scale 0
would leave that correct formula no tolerance at all.

Each mistake has a case built to catch it: the cap applied twice or as `logits * tanh(logits / c)`
fails every capped case (named `beyond_cap_*` and `inside_cap_*`); a cap of None or 0 that is not
treated as "no cap" raises or divides by zero (`cap_None_*`, `cap_0_*`); an in-place tanh changes
the caller's logits (`input_unchanged`).
"""

from __future__ import annotations

import torch

GRADED = "final_logits_softcap"


def make_inputs(gen: torch.Generator) -> list[tuple[str, dict]]:
    def randn(*shape, scale=1.0, dtype=torch.float32):
        return (torch.randn(*shape, generator=gen, dtype=torch.float64) * scale).to(dtype)

    def case(logits, cap, grad=True):
        return {"logits": logits, "cap": cap, "weights": randn(*logits.shape), "grad": grad}

    return [
        ("beyond_cap_float32_2x3x11_cap30", case(randn(2, 3, 11, scale=60.0), 30.0)),
        ("beyond_cap_float32_4x50_cap5", case(randn(4, 50, scale=12.0), 5.0)),
        ("inside_cap_float32_3x7_cap50", case(randn(3, 7, scale=2.0), 50.0)),
        ("int_cap_float32_2x9_cap20", case(randn(2, 9, scale=30.0), 20)),
        ("float64_3x4x13_cap7.5", case(randn(3, 4, 13, scale=20.0, dtype=torch.float64), 7.5)),
        ("magnitude_1e4_2x17_cap30", case(torch.cat([randn(2, 1, scale=10.0), randn(2, 16, scale=1e4)], 1), 30.0)),
        ("vector_V29_cap15", case(randn(29, scale=25.0), 15.0)),
        ("leading_dims_2x2x3x6_cap10", case(randn(2, 2, 3, 6, scale=15.0), 10.0)),
        ("cap_None_2x3x11_unchanged", case(randn(2, 3, 11, scale=60.0), None)),
        ("cap_0_2x8_unchanged", case(randn(2, 8, scale=40.0), 0)),
        ("cap_0.0_with_zero_logits_unchanged", case(torch.zeros(3, 5), 0.0)),
        ("cap_None_float64_4x6_unchanged", case(randn(4, 6, scale=50.0, dtype=torch.float64), None)),
        ("no_grad_input_3x5_cap30", case(randn(3, 5, scale=45.0), 30.0, grad=False)),
        ("empty_0x10_cap30", case(torch.zeros(0, 10), 30.0, grad=False)),
    ]


def call(fn, inputs: dict) -> dict:
    logits = inputs["logits"].clone().requires_grad_(inputs["grad"])
    before = logits.detach().clone()
    capped = fn(logits, inputs["cap"])
    result = {"capped": capped, "input_unchanged": bool(torch.equal(logits.detach(), before))}
    if inputs["grad"]:
        (capped * inputs["weights"].to(capped.dtype)).sum().backward()
        result["grad_logits"] = logits.grad
    return result
