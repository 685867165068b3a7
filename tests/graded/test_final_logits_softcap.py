"""final_logits_softcap (notebook 08): the reference's contract, correct versions that earn full marks
through the real judge, and realistic mistakes that lose them (CONTRIBUTING.md, "Adding a graded
function")."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from course_lib import final_logits_softcap
from tests.helpers import PROPERTY_SETTINGS, corpus_tests, many_draws_test, randn, seeds, shapes

SUITE = "final_logits_softcap"


# ---------------------------------------------------------------- the reference
@PROPERTY_SETTINGS
@given(seeds, st.sampled_from([5.0, 30.0, 50.0]))
def test_reference_matches_float64(seed, cap):
    x = randn(3, 7, seed=seed, scale=100.0)
    got = final_logits_softcap(x, cap)
    torch.testing.assert_close(got.double(), cap * torch.tanh(x.double() / cap), atol=1e-4, rtol=1e-6)
    assert got.abs().max() <= cap


@pytest.mark.parametrize("cap", [None, 0, 0.0])
def test_reference_off_is_identity(cap):
    x = randn(2, 3, scale=100.0)
    assert torch.equal(final_logits_softcap(x, cap), x)


@PROPERTY_SETTINGS
@given(shapes, seeds, st.sampled_from([torch.float32, torch.float64, torch.bfloat16]), st.sampled_from([7.5, 30.0, 20]))
def test_reference_keeps_shape_dtype_and_input(shape, seed, dtype, cap):
    x = randn(*shape, seed=seed, scale=50.0, dtype=dtype)
    before = x.clone()
    got = final_logits_softcap(x, cap)
    assert got.shape == x.shape and got.dtype == dtype
    assert torch.equal(x, before)  # the caller's logits are left alone


@PROPERTY_SETTINGS
@given(seeds, st.sampled_from([5.0, 30.0]))
def test_reference_gradient_is_one_minus_tanh_squared(seed, cap):
    x = randn(4, 6, seed=seed, scale=3 * cap, dtype=torch.float64).requires_grad_()
    final_logits_softcap(x, cap).sum().backward()
    torch.testing.assert_close(x.grad, 1 - torch.tanh(x.detach() / cap) ** 2)


# ---------------------------------------------------------------- correct versions and mistakes
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

CAPPED = ["beyond_cap_float32_2x3x11_cap30", "beyond_cap_float32_4x50_cap5", "inside_cap_float32_3x7_cap50"]
MISTAKES = {
    # tanh of the capped logits again: 40 -> 26.1 -> 21.0
    "softcap_applied_twice": ("""
        import torch
        def final_logits_softcap(logits, cap):
            if not cap:
                return logits
            once = cap * torch.tanh(logits / cap)
            return cap * torch.tanh(once / cap)
    """, CAPPED[:2]),
    # the logits times the tanh: neither bounded nor ~x inside the cap
    "softcap_as_logits_times_tanh": ("""
        import torch
        def final_logits_softcap(logits, cap):
            if not cap:
                return logits
            return logits * torch.tanh(logits / cap)
    """, ["beyond_cap_float32_4x50_cap5", "inside_cap_float32_3x7_cap50"]),
    # tanh alone: in (-1, 1), not in (-cap, cap)
    "softcap_not_scaled_back_by_the_cap": ("""
        import torch
        def final_logits_softcap(logits, cap):
            if not cap:
                return logits
            return torch.tanh(logits / cap)
    """, CAPPED),
    # only None is "no cap": a cap of 0 divides by zero
    "softcap_cap_0_divides_by_zero": ("""
        import torch
        def final_logits_softcap(logits, cap):
            if cap is None:
                return logits
            return cap * torch.tanh(logits / cap)
    """, ["cap_0_2x8_unchanged", "cap_0.0_with_zero_logits_unchanged"]),
    # only 0 is "no cap": None reaches the division
    "softcap_cap_None_not_handled": ("""
        import torch
        def final_logits_softcap(logits, cap):
            if cap == 0:
                return logits
            return cap * torch.tanh(logits / cap)
    """, ["cap_None_2x3x11_unchanged", "cap_None_float64_4x6_unchanged"]),
    # in place: the caller's logits are the capped ones afterwards
    "softcap_in_place_on_the_callers_logits": ("""
        import torch
        def final_logits_softcap(logits, cap):
            if not cap:
                return logits
            return logits.div_(cap).tanh_().mul_(cap)
    """, ["no_grad_input_3x5_cap30"]),
    # a hard clip: equal inside the cap only where |logits| is far below it, and no gradient beyond it
    "clamp_instead_of_tanh": ("""
        import torch
        def final_logits_softcap(logits, cap):
            if not cap:
                return logits
            return logits.clamp(-cap, cap)
    """, CAPPED),
    # always float32: float64 logits must stay float64
    "always_float32": ("""
        import torch
        def final_logits_softcap(logits, cap):
            if not cap:
                return logits
            return cap * torch.tanh(logits.float() / cap)
    """, ["float64_3x4x13_cap7.5"]),
}

test_correct_version_earns_full_marks, test_mistake_loses_its_points = corpus_tests(SUITE, CORRECT, MISTAKES)
test_each_version_holds_on_many_draws = many_draws_test(SUITE, CORRECT, MISTAKES)
