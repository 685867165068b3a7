"""masked_mean (notebook 07): the reference's contract. Its correct versions and known mistakes are in
grader.py (tests/test_graded.py runs them through the judge).
"""

from __future__ import annotations

import math
import torch
from hypothesis import given, strategies as st

from course_lib import masked_mean
from tests.helpers import PROPERTY_SETTINGS, rand_mask, randn, seeds, shapes


# ---------------------------------------------------------------- the reference
@PROPERTY_SETTINGS
@given(shapes, seeds, st.sampled_from([None, 0, 1, -1]))
def test_reference_matches_float64(shape, seed, dim):
    x = randn(*shape, seed=seed)
    m = rand_mask(*shape, seed=seed)
    got = masked_mean(x, m, dim=dim)
    xs, md = x.double() * m.double(), m.double()
    expected = xs.sum() / md.sum() if dim is None else xs.sum(dim) / md.sum(dim)
    torch.testing.assert_close(got.double(), expected, atol=1e-6, rtol=1e-6, equal_nan=True)
    assert got.dtype == x.dtype


def test_reference_empty_mask_gives_nan():
    x = randn(2, 3)
    empty = torch.zeros(2, 3, dtype=torch.bool)
    assert torch.isnan(masked_mean(x, empty)).item()
    assert torch.isnan(masked_mean(x, empty, dim=1)).all()


def test_reference_ignores_non_finite_values_under_the_mask():
    x = torch.tensor([[1.0, -math.inf, 3.0, math.nan]])
    m = torch.tensor([[1, 0, 1, 0]])
    assert masked_mean(x, m).item() == 2.0
    assert masked_mean(x, m, dim=-1).tolist() == [2.0]


def test_reference_accepts_float_and_int_masks():
    x = randn(3, 4, seed=2)
    mb = rand_mask(3, 4, seed=2)
    for m in (mb.float(), mb.long(), mb.int()):
        assert torch.equal(masked_mean(x, m, dim=0), masked_mean(x, mb, dim=0))
        assert torch.equal(masked_mean(x, m), masked_mean(x, mb))


@PROPERTY_SETTINGS
@given(shapes, seeds)
def test_reference_gradient_is_the_mask_over_the_count(shape, seed):
    x = randn(*shape, seed=seed).requires_grad_()
    m = rand_mask(*shape, seed=seed)
    m[..., 0] = True
    masked_mean(x, m, dim=-1).sum().backward()
    torch.testing.assert_close(x.grad, m.float() / m.float().sum(-1, keepdim=True))
