"""grpo_microbatch_train_step (notebook 07): the reference's contract. Its correct versions and known
mistakes are in grader.py (tests/test_graded.py runs them through the judge).
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, strategies as st

from course_lib import grpo_microbatch_train_step
from tests.helpers import PROPERTY_SETTINGS, rand_mask, randn, seeds


# ---------------------------------------------------------------- the reference
@pytest.mark.parametrize("loss_type", ["no_baseline", "reinforce_with_baseline", "grpo_clip"])
def test_reference_matches_float64(loss_type):
    B, T, gas = 3, 5, 2
    logp = (randn(B, T, seed=14) * 0.2 - 1).requires_grad_()
    old = logp.detach() + randn(B, T, seed=15) * 0.1
    mask = rand_mask(B, T, seed=16)
    mask[:, 0] = True
    a = randn(B, 1, seed=17)
    loss, meta = grpo_microbatch_train_step(logp, mask, gas, loss_type, raw_rewards=a, advantages=a, old_log_probs=old,
                                            cliprange=0.2)

    ref = logp.detach().double().requires_grad_()
    if loss_type == "grpo_clip":
        ratio = (ref - old.double()).exp()
        per_token = -torch.minimum(ratio * a.double(), ratio.clamp(0.8, 1.2) * a.double())
    else:
        per_token = -a.double() * ref
    m = mask.double()
    expected = ((per_token * m).sum(-1) / m.sum(-1)).mean() / gas
    expected.backward()
    assert abs(loss.item() - expected.item()) < 1e-6
    torch.testing.assert_close(logp.grad.double(), ref.grad, atol=1e-6, rtol=1e-6)
    if loss_type == "grpo_clip":
        assert 0.0 <= meta["clip_fraction"].item() <= 1.0


def test_reference_accumulates_into_grad():
    logp = randn(2, 4, seed=18).requires_grad_()
    mask = torch.ones(2, 4, dtype=torch.bool)
    a = torch.tensor([[1.0], [-2.0]])
    grpo_microbatch_train_step(logp, mask, 2, "reinforce_with_baseline", advantages=a)
    first = logp.grad.clone()
    grpo_microbatch_train_step(logp, mask, 2, "reinforce_with_baseline", advantages=a)
    torch.testing.assert_close(logp.grad, 2 * first)
    assert first.abs().sum() > 0


def test_reference_invalid_loss_type():
    with pytest.raises(ValueError, match="unknown loss_type"):
        grpo_microbatch_train_step(torch.zeros(1, 2, requires_grad=True), torch.ones(1, 2), 1, "dpo")


@PROPERTY_SETTINGS
@given(seeds, st.integers(1, 4), st.sampled_from([0.1, 0.2]))
def test_reference_clip_fraction_and_the_loss_it_backpropagates(seed, k, cliprange):
    """The clip fraction is the share of clipped tokens among those of mask 1 (padding never counts);
    the returned loss is the one whose gradient is in .grad."""
    logp = (randn(3, 6, seed=seed) * 0.3 - 1).requires_grad_()
    old = logp.detach() + randn(3, 6, seed=seed + 1) * 0.4
    mask = rand_mask(3, 6, seed=seed)
    mask[:, 0] = True
    a = randn(3, 1, seed=seed + 2)
    loss, meta = grpo_microbatch_train_step(logp, mask, k, "grpo_clip", advantages=a, old_log_probs=old,
                                            cliprange=cliprange)
    assert torch.equal(meta["clip_fraction"], meta["clipped"][mask].float().mean())
    mine = logp.detach().clone().requires_grad_()
    ratio = torch.exp(mine - old)
    per_token = -torch.minimum(ratio * a, ratio.clamp(1 - cliprange, 1 + cliprange) * a)
    m = mask.float()
    expected = ((per_token * m).sum(-1) / m.sum(-1)).mean() / k
    expected.backward()
    torch.testing.assert_close(loss, expected.detach())
    torch.testing.assert_close(logp.grad, mine.grad)
