"""masked_normalize (notebook 03): the reference's contract. Its correct versions and known mistakes
are in grader.py (tests/test_graded.py runs them through the judge).
"""

from __future__ import annotations

import math
import torch
from hypothesis import given, strategies as st

from course_lib import masked_normalize
from tests.helpers import PROPERTY_SETTINGS, rand_mask, randn, seeds, shapes


dims = st.sampled_from([None, 0, 1, -1])


# ---------------------------------------------------------------- the reference
@PROPERTY_SETTINGS
@given(shapes, seeds, dims, st.sampled_from([1.0, 42.0, 0.5]))
def test_masked_normalize_matches_float64(shape, seed, dim, constant):
    x = randn(*shape, seed=seed)
    m = rand_mask(*shape, seed=seed)
    got = masked_normalize(x, m, dim=dim, normalize_constant=constant)
    xs = (x.double() * m.double())
    expected = (xs.sum() if dim is None else xs.sum(dim)) / constant
    torch.testing.assert_close(got.double(), expected, atol=1e-6, rtol=1e-6)


def test_masked_normalize_empty_mask():
    x = randn(2, 3)
    empty = torch.zeros(2, 3, dtype=torch.bool)
    assert masked_normalize(x, empty).item() == 0.0
    assert torch.equal(masked_normalize(x, empty, dim=1), torch.zeros(2))


def test_masked_normalize_ignores_non_finite_values_under_the_mask():
    x = torch.tensor([[1.0, -math.inf, 3.0]])
    m = torch.tensor([[1, 0, 1]])
    assert masked_normalize(x, m).item() == 4.0


def test_masked_normalize_accepts_float_and_int_masks():
    x = randn(3, 4, seed=2)
    mb = rand_mask(3, 4, seed=2)
    for m in (mb.float(), mb.long()):
        assert torch.equal(masked_normalize(x, m, dim=1, normalize_constant=42.0), masked_normalize(x, mb, dim=1, normalize_constant=42.0))


@PROPERTY_SETTINGS
@given(shapes, seeds, dims, st.sampled_from([1.0, 42.0, 0.5, 3]))
def test_reference_all_zero_mask_gives_zero(shape, seed, dim, constant):
    x = randn(*shape, seed=seed, scale=1e4)
    x[..., 0] = -math.inf  # masked out: must not leak
    got = masked_normalize(x, torch.zeros(shape, dtype=torch.bool), dim=dim, normalize_constant=constant)
    assert torch.equal(got, torch.zeros_like(got)) and got.shape == (() if dim is None else x.sum(dim).shape)


@PROPERTY_SETTINGS
@given(shapes, seeds, dims, st.sampled_from([42.0, 0.5, 3, 1e-3, 7.25]))
def test_reference_constant_scales_exactly(shape, seed, dim, constant):
    x, m = randn(*shape, seed=seed), rand_mask(*shape, seed=seed)
    plain = masked_normalize(x, m, dim=dim)  # the default constant, 1: a plain masked sum
    assert torch.equal(masked_normalize(x, m, dim=dim, normalize_constant=constant), plain / constant)


@PROPERTY_SETTINGS
@given(shapes, seeds, dims, st.sampled_from([1.0, 42.0]))
def test_reference_gradient_is_the_mask_over_the_constant(shape, seed, dim, constant):
    x = randn(*shape, seed=seed).requires_grad_()
    m = rand_mask(*shape, seed=seed)
    masked_normalize(x, m, dim=dim, normalize_constant=constant).sum().backward()
    torch.testing.assert_close(x.grad, m.float() / constant, atol=0, rtol=1e-6)


def test_reference_keeps_float64():
    x = randn(3, 4, dtype=torch.float64)
    assert masked_normalize(x, rand_mask(3, 4), dim=-1, normalize_constant=42.0).dtype == torch.float64
