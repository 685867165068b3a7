"""kl_k3 (notebook 10): the reference's contract. Its correct versions and known mistakes are in
grader.py (tests/test_graded.py runs them through the judge).
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, strategies as st

from course_lib import kl_k3
from tests.helpers import PROPERTY_SETTINGS, randn, seeds, shapes


def log_probs_pair(shape, seed, scale=1.0, dtype=torch.float32):
    """(policy, ref) log-probs at or below 0 whose difference ref - policy is a N(0, scale^2) draw."""
    log_r = randn(*shape, seed=seed, dtype=torch.float64, scale=scale)
    policy = -randn(*shape, seed=seed + 1, dtype=torch.float64).abs() - log_r.clamp(min=0)
    return policy.to(dtype), (policy + log_r).to(dtype)


# ---------------------------------------------------------------- the reference
@PROPERTY_SETTINGS
@given(shapes, seeds, st.sampled_from([torch.float32, torch.float64]), st.sampled_from([0.1, 1.0, 5.0]))
def test_reference_matches_float64(shape, seed, dtype, scale):
    policy, ref = log_probs_pair(shape, seed, scale, dtype)
    got = kl_k3(policy, ref)
    x = ref.double() - policy.double()
    expected = torch.exp(x) - 1 - x  # float64, which rounds at 1e-16 (e^x + 1 + |x|)
    assert got.shape == policy.shape and got.dtype == dtype
    # expm1 rounds at eps |e^x - 1|, the subtraction at eps k3
    bound = 4 * torch.finfo(dtype).eps * (torch.expm1(x).abs() + expected) + 4e-16 * (x.exp() + 1 + x.abs())
    assert ((got.double() - expected).abs() <= bound).all()
    assert (got >= 0).all()


@PROPERTY_SETTINGS
@given(seeds)
def test_reference_keeps_its_digits_near_r_equal_1_in_float32(seed):
    policy = -torch.rand(4, 16, generator=torch.Generator().manual_seed(seed), dtype=torch.float64) * 2 - 0.5
    g = torch.Generator().manual_seed(seed + 1)
    log_r = 10 ** (-4 + torch.rand(4, 16, generator=g, dtype=torch.float64)) * torch.where(
        torch.rand(4, 16, generator=g) < 0.5, -1.0, 1.0).double()
    policy32, ref32 = policy.float(), (policy + log_r).float()
    got = kl_k3(policy32, ref32)
    x = ref32.double() - policy32.double()
    series = x**2 / 2 + x**3 / 6 + x**4 / 24 + x**5 / 120  # exact to 1e-17 here
    # expm1 rounds at eps |x|: some 1e-3 of a value x^2 / 2 at |x| = 1e-4, the last digits only
    assert ((got.double() - series).abs() <= torch.finfo(torch.float32).eps * x.abs()).all()
    naive = torch.exp(x.float()) - 1 - x.float()  # the trap: float32 exp near 1 rounds at 6e-8
    assert ((naive.double() - series).abs() / series).max() > 1e-1


@PROPERTY_SETTINGS
@given(seeds, st.integers(2, 12))
def test_reference_is_unbiased_over_the_vocabulary(seed, V):
    """E_{o ~ pi}[k3] = sum(pi_ref) - 1 + KL(pi || pi_ref) = KL: the expectation taken exactly, over every token."""
    log_pi = torch.log_softmax(randn(V, seed=seed, dtype=torch.float64, scale=2.0), -1)
    log_ref = torch.log_softmax(randn(V, seed=seed + 1, dtype=torch.float64, scale=2.0), -1)
    expectation = (log_pi.exp() * kl_k3(log_pi, log_ref)).sum()
    kl = (log_pi.exp() * (log_pi - log_ref)).sum()
    torch.testing.assert_close(expectation, kl)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_reference_is_finite_up_to_log_ratio_20(dtype):
    log_r = torch.linspace(-20, 20, 81, dtype=torch.float64)
    policy = -1.0 - log_r.clamp(min=0)
    got = kl_k3(policy.to(dtype), (policy + log_r).to(dtype))
    assert torch.isfinite(got).all()
    torch.testing.assert_close(got.double(), torch.exp(log_r) - 1 - log_r, atol=0.0, rtol=1e-5)


@PROPERTY_SETTINGS
@given(shapes, seeds)
def test_reference_gradient_is_r_minus_1(shape, seed):
    policy, ref = log_probs_pair(shape, seed, dtype=torch.float64)
    policy.requires_grad_()
    ref.requires_grad_()
    kl_k3(policy, ref).sum().backward()
    r_minus_1 = torch.expm1(ref.detach() - policy.detach())
    torch.testing.assert_close(ref.grad, r_minus_1)
    torch.testing.assert_close(policy.grad, -r_minus_1)


def test_reference_rejects_shapes_that_differ():
    with pytest.raises(ValueError, match="ref_log_probs"):
        kl_k3(torch.zeros(2, 3), torch.zeros(2, 4))
