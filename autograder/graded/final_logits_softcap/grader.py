"""The grader's side of `final_logits_softcap` (notebook 08): how its hidden cases are drawn, the
correct versions that must earn full marks and the known mistakes that must lose them, each with the
sentence a student reads (`autograder.mistakes`). Never in a student kit or the grading sandbox,
which hold the folder's __init__.py only.

Hidden cases of `final_logits_softcap(logits, cap) -> (..., V)`: caps of several sizes and types,
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

from autograder.mistakes import Mistake


# ---------------------------------------------------------------- the hidden cases
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


# ---------------------------------------------------------------- the correct versions
CAPPED = ["beyond_cap_float32_2x3x11_cap30", "beyond_cap_float32_4x50_cap5", "inside_cap_float32_3x7_cap50"]


CORRECT = {
    "tanh_formula": """
        import torch
        def final_logits_softcap(logits, cap):
            if not cap:
                return logits
            return cap * torch.tanh(logits / cap)
    """,
    "explicit_none_and_zero": """
        import torch
        def final_logits_softcap(logits, cap):
            if cap is None or cap == 0:
                return logits
            return logits.div(cap).tanh().mul(cap)
    """,
    "float64_inside": """
        import torch
        def final_logits_softcap(logits, cap):
            if cap in (None, 0):
                return logits
            return (float(cap) * torch.tanh(logits.double() / float(cap))).to(logits.dtype)
    """,
    # tanh(x) = sign(x) (1 - e^{-2|x|}) / (1 + e^{-2|x|}), with expm1 so that small |x| keeps its digits
    "tanh_from_expm1": """
        import torch
        def final_logits_softcap(logits, cap):
            if not cap:
                return logits
            x = logits / cap
            e = torch.expm1(-2 * x.abs())
            return cap * torch.sign(x) * (-e / (2 + e))
    """,
    # tanh(x) = 2 sigmoid(2x) - 1: loses about one unit of the cap's rounding near 0, within the tolerance
    "sigmoid_identity": """
        import torch
        def final_logits_softcap(logits, cap):
            if cap is None or cap == 0:
                return logits
            return cap * (2 * torch.sigmoid(2 * logits / cap) - 1)
    """,
}


# ---------------------------------------------------------------- the known mistakes
MISTAKES = {
    # tanh of the capped logits again: 40 -> 26.1 -> 21.0
    "softcap_applied_twice": Mistake(
        "applies the cap twice: cap * tanh(cap * tanh(x / cap) / cap)",
        """
        import torch
        def final_logits_softcap(logits, cap):
            if not cap:
                return logits
            once = cap * torch.tanh(logits / cap)
            return cap * torch.tanh(once / cap)
    """,
        CAPPED[:2]),
    # the logits times the tanh: neither bounded nor ~x inside the cap
    "softcap_as_logits_times_tanh": Mistake(
        "returns logits * tanh(logits / cap) instead of cap * tanh(logits / cap)",
        """
        import torch
        def final_logits_softcap(logits, cap):
            if not cap:
                return logits
            return logits * torch.tanh(logits / cap)
    """,
        ["beyond_cap_float32_4x50_cap5", "inside_cap_float32_3x7_cap50"]),
    # tanh alone: in (-1, 1), not in (-cap, cap)
    "softcap_not_scaled_back_by_the_cap": Mistake(
        "returns tanh(logits / cap) without multiplying back by the cap: values in (-1, 1), not (-cap, cap)",
        """
        import torch
        def final_logits_softcap(logits, cap):
            if not cap:
                return logits
            return torch.tanh(logits / cap)
    """,
        CAPPED),
    # only None is "no cap": a cap of 0 divides by zero
    "softcap_cap_0_divides_by_zero": Mistake(
        "treats only None as no cap, so a cap of 0 divides by zero",
        """
        import torch
        def final_logits_softcap(logits, cap):
            if cap is None:
                return logits
            return cap * torch.tanh(logits / cap)
    """,
        ["cap_0_2x8_unchanged", "cap_0.0_with_zero_logits_unchanged"]),
    # only 0 is "no cap": None reaches the division
    "softcap_cap_None_not_handled": Mistake(
        "treats only 0 as no cap, so a cap of None reaches the division",
        """
        import torch
        def final_logits_softcap(logits, cap):
            if cap == 0:
                return logits
            return cap * torch.tanh(logits / cap)
    """,
        ["cap_None_2x3x11_unchanged", "cap_None_float64_4x6_unchanged"]),
    # in place: the caller's logits are the capped ones afterwards
    "softcap_in_place_on_the_callers_logits": Mistake(
        "caps in place, changing the caller's logits",
        """
        import torch
        def final_logits_softcap(logits, cap):
            if not cap:
                return logits
            return logits.div_(cap).tanh_().mul_(cap)
    """,
        ["no_grad_input_3x5_cap30"]),
    # a hard clip: equal inside the cap only where |logits| is far below it, and no gradient beyond it
    "clamp_instead_of_tanh": Mistake(
        "clamps the logits to [-cap, cap] instead of cap * tanh(logits / cap)",
        """
        import torch
        def final_logits_softcap(logits, cap):
            if not cap:
                return logits
            return logits.clamp(-cap, cap)
    """,
        CAPPED),
    # always float32: float64 logits must stay float64
    "always_float32": Mistake(
        "computes in float32 always: float64 logits must stay float64",
        """
        import torch
        def final_logits_softcap(logits, cap):
            if not cap:
                return logits
            return cap * torch.tanh(logits.float() / cap)
    """,
        ["float64_3x4x13_cap7.5"]),
    # notebook 08's visible check: "the gradient should be 1 - tanh^2(z / c): do not detach"
    "softcap_without_a_graph": Mistake(
        "computes the cap under torch.no_grad(), so the capped logits have no gradient",
        """
        import torch
        def final_logits_softcap(logits, cap):
            if not cap:
                return logits
            with torch.no_grad():
                return cap * torch.tanh(logits / cap)
    """,
        ["beyond_cap_float32_2x3x11_cap30", "inside_cap_float32_3x7_cap50"]),
}
