"""exact_kl (notebook 10): the reference's contract. Its correct versions and known mistakes are in
grader.py (tests/test_graded.py runs them through the judge).
"""

from __future__ import annotations

import math
import pytest
import torch
from hypothesis import given, strategies as st

from course_lib import exact_kl
from tests.helpers import PROPERTY_SETTINGS, randn, seeds, shapes


def kl_float64(policy_logits, ref_logits):
    """Independent: the definition on float64 probabilities after a max shift, 0 where pi is 0."""
    def log_p(z):
        z = z.double() - z.double().max(dim=-1, keepdim=True).values
        return z - z.exp().sum(-1, keepdim=True).log()

    lp, lq = log_p(policy_logits), log_p(ref_logits)
    p = lp.exp()
    return torch.where(p > 0, p * (lp - lq), torch.zeros_like(p)).sum(-1)


# ---------------------------------------------------------------- the reference
@PROPERTY_SETTINGS
@given(shapes, seeds, st.sampled_from([torch.float32, torch.float64]), st.sampled_from([1.0, 5.0, 1e3]))
def test_reference_matches_float64(shape, seed, dtype, scale):
    policy, ref = randn(*shape, seed=seed, dtype=dtype, scale=scale), randn(*shape, seed=seed + 1, dtype=dtype, scale=scale)
    got = exact_kl(policy, ref)
    assert got.shape == shape[:-1] and got.dtype == dtype
    assert torch.isfinite(got).all() and (got >= -1e-6).all()
    expected = kl_float64(policy, ref)
    tol = 1e-5 if dtype == torch.float32 else 1e-12
    torch.testing.assert_close(got.double(), expected, atol=tol * (1 + expected.abs().max().item()), rtol=tol)


def test_reference_is_exact_for_logits_far_apart_in_float32():
    policy = torch.tensor([[1e3, 1e3 - 1.0, -1e3, 0.0]])
    ref = torch.tensor([[-1e3, 0.0, 1e3, 2.0]])
    got = exact_kl(policy, ref)
    p = torch.tensor([1.0, math.exp(-1.0)], dtype=torch.float64)
    p = p / p.sum()
    # pi puts all its mass on the first two tokens, where log pi_ref is -2000 and -1000
    expected = float((p * (p.log() - torch.tensor([-2000.0, -1000.0], dtype=torch.float64))).sum())
    assert torch.isfinite(got).all() and abs(got.item() - expected) <= 1e-6 * expected
    trap = torch.softmax(policy, -1)
    assert torch.isnan((trap * (trap.log() - torch.softmax(ref, -1).log())).sum())  # 0 * log 0


def test_reference_is_0_for_identical_logits_and_not_symmetric():
    z = randn(3, 7, seed=5, scale=2.0)
    assert torch.equal(exact_kl(z, z), torch.zeros(3))
    assert exact_kl(z, z + 4.0).abs().max() < 1e-6  # shifted logits: the same distribution
    peaked, flat = randn(5, seed=6, scale=6.0), randn(5, seed=7, scale=0.3)
    assert abs(exact_kl(peaked, flat).item() - exact_kl(flat, peaked).item()) > 0.1


@PROPERTY_SETTINGS
@given(shapes, seeds)
def test_reference_gradients(shape, seed):
    policy = randn(*shape, seed=seed, dtype=torch.float64, scale=2.0).requires_grad_()
    ref = randn(*shape, seed=seed + 1, dtype=torch.float64, scale=2.0).requires_grad_()
    kl = exact_kl(policy, ref)
    kl.sum().backward()
    lp, lq = torch.log_softmax(policy.detach(), -1), torch.log_softmax(ref.detach(), -1)
    p = lp.exp()
    torch.testing.assert_close(policy.grad, p * (lp - lq - kl.detach().unsqueeze(-1)))
    torch.testing.assert_close(ref.grad, lq.exp() - p)


def test_reference_rejects_shapes_that_differ():
    with pytest.raises(ValueError, match="ref_logits"):
        exact_kl(torch.zeros(2, 5), torch.zeros(2, 6))
