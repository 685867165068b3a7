"""compute_entropy (notebook 02): the reference's contract. Its correct versions and known mistakes are
in grader.py (tests/test_graded.py runs them through the judge).
"""

from __future__ import annotations

import math
import torch
from hypothesis import given, strategies as st

from course_lib import compute_entropy
from tests.helpers import PROPERTY_SETTINGS, randn, seeds, shapes


# ---------------------------------------------------------------- the reference
def entropy_float64(logits):
    """Independent: the definition on float64 probabilities after a max shift."""
    x = logits.double()
    x = x - x.max(dim=-1, keepdim=True).values
    p = x.exp() / x.exp().sum(-1, keepdim=True)
    logp = x - x.exp().sum(-1, keepdim=True).log()
    return -(torch.where(p > 0, p * logp, torch.zeros_like(p))).sum(-1)


@PROPERTY_SETTINGS
@given(shapes, seeds, st.sampled_from([1.0, 10.0, 1e4]))
def test_reference_matches_float64(shape, seed, scale):
    logits = randn(*shape, seed=seed, scale=scale)
    got = compute_entropy(logits)
    assert got.shape == shape[:-1]
    assert torch.isfinite(got).all()
    torch.testing.assert_close(got.double(), entropy_float64(logits), atol=1e-5, rtol=1e-5)


def test_reference_uniform_and_one_hot():
    assert torch.allclose(compute_entropy(torch.zeros(2, 7)), torch.full((2,), math.log(7)))
    peaked = torch.tensor([[1e4, -1e4, 0.0]])
    assert compute_entropy(peaked).item() == 0.0


def test_reference_large_float32_logits_are_finite_and_exact():
    logits = torch.tensor([[1e4, 1e4 - 1.0, -1e4, 3.0]], dtype=torch.float32)
    got = compute_entropy(logits)
    p = torch.tensor([1.0, math.exp(-1.0)], dtype=torch.float64)
    p = p / p.sum()
    assert torch.isfinite(got).all()
    assert abs(got.item() - float(-(p * p.log()).sum())) < 1e-6


def test_reference_low_precision_is_computed_in_float32():
    logits = randn(3, 50, seed=3, scale=5.0)
    got = compute_entropy(logits.to(torch.bfloat16))
    assert got.dtype == torch.float32
    torch.testing.assert_close(got.double(), entropy_float64(logits.to(torch.bfloat16)), atol=1e-5, rtol=1e-5)
