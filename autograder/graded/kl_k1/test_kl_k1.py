"""kl_k1 (notebook 10): the reference's contract. Its correct versions and known mistakes are in
grader.py (tests/test_graded.py runs them through the judge).
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, strategies as st

from course_lib import kl_k1
from tests.helpers import PROPERTY_SETTINGS, randn, seeds, shapes


def log_probs_pair(shape, seed, scale=1.0, dtype=torch.float32):
    """(policy, ref) log-probs at or below 0 whose difference ref - policy is a N(0, scale^2) draw."""
    log_r = randn(*shape, seed=seed, dtype=torch.float64, scale=scale)
    policy = -randn(*shape, seed=seed + 1, dtype=torch.float64).abs() - log_r.clamp(min=0)
    return policy.to(dtype), (policy + log_r).to(dtype)


# ---------------------------------------------------------------- the reference
@PROPERTY_SETTINGS
@given(shapes, seeds, st.sampled_from([torch.float32, torch.float64]), st.sampled_from([1e-3, 1.0, 20.0]))
def test_reference_matches_float64(shape, seed, dtype, scale):
    policy, ref = log_probs_pair(shape, seed, scale, dtype)
    got = kl_k1(policy, ref)
    assert got.shape == policy.shape and got.dtype == dtype
    expected = -(ref.double() - policy.double())  # -log r
    torch.testing.assert_close(got.double(), expected, atol=0.0, rtol=torch.finfo(dtype).eps)


@PROPERTY_SETTINGS
@given(seeds, st.integers(2, 12))
def test_reference_is_unbiased_over_the_vocabulary(seed, V):
    """E_{o ~ pi}[k1] = KL(pi || pi_ref): the expectation taken exactly, over every token."""
    log_pi = torch.log_softmax(randn(V, seed=seed, dtype=torch.float64, scale=2.0), -1)
    log_ref = torch.log_softmax(randn(V, seed=seed + 1, dtype=torch.float64, scale=2.0), -1)
    expectation = (log_pi.exp() * kl_k1(log_pi, log_ref)).sum()
    kl = (log_pi.exp() * (log_pi - log_ref)).sum()
    torch.testing.assert_close(expectation, kl)


def test_reference_takes_negative_values():
    assert kl_k1(torch.tensor([-2.0]), torch.tensor([-1.0])).item() == -1.0


@PROPERTY_SETTINGS
@given(shapes, seeds)
def test_reference_gradient_is_plus_and_minus_one(shape, seed):
    policy, ref = log_probs_pair(shape, seed, dtype=torch.float64)
    policy.requires_grad_()
    ref.requires_grad_()
    kl_k1(policy, ref).sum().backward()
    assert torch.equal(policy.grad, torch.ones_like(policy))
    assert torch.equal(ref.grad, -torch.ones_like(ref))


def test_reference_rejects_shapes_that_differ():
    with pytest.raises(ValueError, match="ref_log_probs"):
        kl_k1(torch.zeros(2, 3), torch.zeros(3, 2))
