"""exact_kl (notebook 10): the reference's contract, correct versions that earn full marks through
the real judge, and realistic mistakes that lose them (CONTRIBUTING.md, "Adding a graded function")."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from autograder.mistakes.exact_kl import FORMULA
from course_lib import exact_kl
from tests.helpers import PROPERTY_SETTINGS, corpus_tests, many_draws_test, randn, seeds, shapes

SUITE = "exact_kl"


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


# ---------------------------------------------------------------- correct versions and mistakes
CORRECT = {
    "log_softmax_formula": FORMULA,
    # kl_div(input, target) is target * (target - input) with log_target: input log pi_ref, target log pi
    "kl_div_log_target": """
        import torch
        import torch.nn.functional as F
        def exact_kl(policy_logits, ref_logits):
            log_pi = F.log_softmax(policy_logits, dim=-1)
            log_ref = F.log_softmax(ref_logits, dim=-1)
            return F.kl_div(log_ref, log_pi, reduction="none", log_target=True).sum(-1)
    """,
    # minus the entropy plus the cross-entropy, with pi from softmax (0 where it underflows, times a finite log)
    "cross_entropy_minus_entropy": """
        import torch
        def exact_kl(policy_logits, ref_logits):
            p = torch.softmax(policy_logits, dim=-1)
            log_p = torch.log_softmax(policy_logits, dim=-1)
            log_q = torch.log_softmax(ref_logits, dim=-1)
            return (p * log_p).sum(-1) - (p * log_q).sum(-1)
    """,
    "logsumexp_by_hand_with_max_shift": """
        import torch
        def log_softmax_by_hand(z):
            shifted = z - z.max(dim=-1, keepdim=True).values
            return shifted - torch.log(torch.exp(shifted).sum(dim=-1, keepdim=True))

        def exact_kl(policy_logits, ref_logits):
            lp = log_softmax_by_hand(policy_logits)
            lq = log_softmax_by_hand(ref_logits)
            return torch.sum(torch.exp(lp) * (lp - lq), dim=-1)
    """,
    "float64_inside": """
        import torch
        def exact_kl(policy_logits, ref_logits):
            lp = torch.log_softmax(policy_logits.double(), dim=-1)
            lq = torch.log_softmax(ref_logits.double(), dim=-1)
            return (lp.exp() * (lp - lq)).sum(-1).to(policy_logits.dtype)
    """,
}


test_correct_version_earns_full_marks, test_mistake_loses_its_points = corpus_tests(SUITE, CORRECT)
test_each_version_holds_on_many_draws = many_draws_test(SUITE, CORRECT)
