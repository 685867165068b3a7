"""compute_naive_policy_gradient_loss (notebook 07): the reference's contract. Its correct versions and
known mistakes are in grader.py (tests/test_graded.py runs them through the judge).
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, strategies as st

from course_lib import compute_naive_policy_gradient_loss
from tests.helpers import PROPERTY_SETTINGS, randn, seeds


# ---------------------------------------------------------------- the reference
def test_reference_loss_and_gradient():
    adv = randn(3, 1, seed=10)
    logp = randn(3, 4, seed=11).requires_grad_()
    loss = compute_naive_policy_gradient_loss(adv, logp)
    torch.testing.assert_close(loss, -adv * logp)
    loss.sum().backward()
    torch.testing.assert_close(logp.grad, -adv.expand(3, 4))


def test_reference_never_broadcasts_over_the_batch():
    # (B,) advantages with B == T would silently broadcast along tokens; they are taken per row
    adv = torch.tensor([1.0, 2.0, 3.0])
    logp = torch.ones(3, 3)
    torch.testing.assert_close(compute_naive_policy_gradient_loss(adv, logp), -adv[:, None].expand(3, 3))
    with pytest.raises(ValueError, match=r"\(B, 1\)"):
        compute_naive_policy_gradient_loss(torch.ones(3, 2), logp)


@PROPERTY_SETTINGS
@given(st.integers(1, 6), st.integers(1, 9), seeds, st.booleans(), st.sampled_from([torch.float32, torch.float64]))
def test_reference_matches_float64_for_columns_and_vectors(B, T, seed, column, dtype):
    a = randn(B, 1, seed=seed, dtype=dtype)
    logp = (-randn(B, T, seed=seed + 1, dtype=dtype).abs()).requires_grad_()
    loss = compute_naive_policy_gradient_loss(a if column else a.view(-1), logp)
    assert loss.shape == (B, T) and loss.dtype == dtype
    assert torch.equal(loss, -a * logp.detach())  # one rounding of the exact product: nothing else to differ
    torch.testing.assert_close(loss.double(), -a.double() * logp.detach().double(), atol=1e-6, rtol=1e-6)
    weights = randn(B, T, seed=seed + 2, dtype=dtype)
    (loss * weights).sum().backward()
    torch.testing.assert_close(logp.grad.double(), -(a * weights).double(), atol=1e-6, rtol=1e-6)
