"""compute_grpo_clip_loss (notebook 07): the reference's contract. Its correct versions and known
mistakes are in grader.py (tests/test_graded.py runs them through the judge).
"""

from __future__ import annotations

import torch
from hypothesis import given, strategies as st

from course_lib import compute_grpo_clip_loss
from tests.helpers import PROPERTY_SETTINGS, randn, seeds


# ---------------------------------------------------------------- the reference
@PROPERTY_SETTINGS
@given(seeds, st.sampled_from([0.1, 0.2, 0.5]))
def test_reference_matches_float64(seed, eps):
    adv = randn(4, 1, seed=seed)
    old = randn(4, 5, seed=seed + 1) * 0.3 - 1
    new = (old + randn(4, 5, seed=seed + 2) * 0.5).requires_grad_()
    loss, meta = compute_grpo_clip_loss(adv, new, old, eps)
    ratio = (new.detach().double() - old.double()).exp()
    a = adv.double()
    expected = -torch.minimum(ratio * a, ratio.clamp(1 - eps, 1 + eps) * a)
    torch.testing.assert_close(loss.double(), expected, atol=1e-6, rtol=1e-6)
    clipped = ratio.clamp(1 - eps, 1 + eps) * a < ratio * a
    assert torch.equal(meta["clipped"], clipped)
    loss.sum().backward()
    # where the clipped term is the minimum the gradient is exactly 0; elsewhere -A * ratio
    expected_grad = torch.where(clipped, torch.zeros_like(ratio), -a * ratio)
    torch.testing.assert_close(new.grad.double(), expected_grad, atol=1e-6, rtol=1e-6)


@PROPERTY_SETTINGS
@given(seeds, st.sampled_from([0.1, 0.2, 0.5]))
def test_reference_clips_by_the_sign_of_the_advantage(seed, eps):
    """For A > 0 only a ratio above 1 + eps is clipped, for A < 0 only one below 1 - eps, for A = 0 none."""
    adv = torch.tensor([[1.0], [-1.0], [0.0]])
    old = randn(3, 8, seed=seed) * 0.3 - 2
    new = old + (torch.rand(3, 8, generator=torch.Generator().manual_seed(seed)) * 2 - 1)
    _, meta = compute_grpo_clip_loss(adv, new, old, eps)
    ratio = meta["ratio"]
    assert torch.equal(meta["clipped"][0], ratio[0] > 1 + eps)
    assert torch.equal(meta["clipped"][1], ratio[1] < 1 - eps)
    assert not meta["clipped"][2].any()


def test_reference_on_policy_is_the_pg_gradient():
    adv = torch.tensor([[1.5], [-0.5]])
    logp = randn(2, 3, seed=12).requires_grad_()
    loss, meta = compute_grpo_clip_loss(adv, logp, logp.detach(), 0.2)
    torch.testing.assert_close(loss, -adv.expand(2, 3))  # ratio 1: loss is -A
    loss.sum().backward()
    torch.testing.assert_close(logp.grad, -adv.expand(2, 3))  # ...but the gradient is not 0
    assert not meta["clipped"].any()


def test_reference_is_finite_for_log_probs_near_minus_100_in_float32():
    old = torch.full((2, 3), -110.0)
    new = old + torch.tensor([[0.5, 0.0, -0.5], [0.1, -0.1, 0.0]])
    loss, _ = compute_grpo_clip_loss(torch.tensor([1.0, -1.0]), new, old, 0.2)
    assert torch.isfinite(loss).all()
    assert (torch.exp(new) / torch.exp(old)).isnan().any()  # the trap: exp underflows to 0 in float32
