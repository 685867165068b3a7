"""final_logits_softcap (notebook 08): the reference's contract. Its correct versions and known
mistakes are in grader.py (tests/test_graded.py runs them through the judge).
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, strategies as st

from course_lib import final_logits_softcap
from tests.helpers import PROPERTY_SETTINGS, randn, seeds, shapes


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
