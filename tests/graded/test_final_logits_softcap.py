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


test_correct_version_earns_full_marks, test_mistake_loses_its_points = corpus_tests(SUITE, CORRECT)
test_each_version_holds_on_many_draws = many_draws_test(SUITE, CORRECT)
