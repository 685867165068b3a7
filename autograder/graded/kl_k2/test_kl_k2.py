"""kl_k2 (notebook 10): the reference's contract. Its correct versions and known mistakes are in
grader.py (tests/test_graded.py runs them through the judge).
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, strategies as st

from course_lib import kl_k2
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
    got = kl_k2(policy, ref)
    assert got.shape == policy.shape and got.dtype == dtype
    log_r = ref.double() - policy.double()
    torch.testing.assert_close(got.double(), log_r * log_r / 2, atol=0.0, rtol=4 * torch.finfo(dtype).eps)
    assert (got >= 0).all()


@PROPERTY_SETTINGS
@given(seeds, st.integers(2, 12))
def test_reference_matches_the_kl_to_second_order(seed, V):
    """E_{o ~ pi}[k2] = KL(pi || pi_ref) + O(|log r|^3): taken exactly over the vocabulary, for a
    pi_ref close to pi (log-probs moved by at most 1e-2), the two agree to about 1e-2 of the KL."""
    log_pi = torch.log_softmax(randn(V, seed=seed, dtype=torch.float64, scale=2.0), -1)
    log_ref = torch.log_softmax(log_pi + 1e-2 * torch.tanh(randn(V, seed=seed + 1, dtype=torch.float64)), -1)
    expectation = (log_pi.exp() * kl_k2(log_pi, log_ref)).sum()
    kl = (log_pi.exp() * (log_pi - log_ref)).sum()
    assert abs(float(expectation - kl)) <= 0.03 * float(kl)


@PROPERTY_SETTINGS
@given(shapes, seeds)
def test_reference_gradient_is_the_log_ratio(shape, seed):
    policy, ref = log_probs_pair(shape, seed, dtype=torch.float64)
    policy.requires_grad_()
    ref.requires_grad_()
    kl_k2(policy, ref).sum().backward()
    log_r = ref.detach() - policy.detach()
    torch.testing.assert_close(ref.grad, log_r)
    torch.testing.assert_close(policy.grad, -log_r)


def test_reference_rejects_shapes_that_differ():
    with pytest.raises(ValueError, match="ref_log_probs"):
        kl_k2(torch.zeros(4), torch.zeros(4, 1))
