"""dpo_loss (notebook 12): the reference's contract. Its correct versions and known mistakes are in
grader.py (tests/test_graded.py runs them through the judge).
"""

from __future__ import annotations

import math
import pytest
import torch
from hypothesis import given, strategies as st

from course_lib import dpo_loss
from tests.helpers import PROPERTY_SETTINGS, randn, seeds


def four(B, seed, dtype=torch.float32, spread=5.0):
    """Sequence log-probs: policy and reference near each other, all negative."""
    pc, pr = -randn(B, seed=seed, scale=20.0).abs() - 1, -randn(B, seed=seed + 1, scale=20.0).abs() - 1
    rc, rr = pc + randn(B, seed=seed + 2, scale=spread), pr + randn(B, seed=seed + 3, scale=spread)
    return [t.to(dtype) for t in (pc, pr, rc, rr)]


def loss_float64(pc, pr, rc, rr, beta):
    """Independent: softplus(-x) = max(-x, 0) + log1p(exp(-|x|)) on the float64 margins."""
    x = beta * ((pc.double() - rc.double()) - (pr.double() - rr.double()))
    return ((-x).clamp(min=0) + torch.log1p(torch.exp(-x.abs()))).mean()


# ---------------------------------------------------------------- the reference
@PROPERTY_SETTINGS
@given(st.integers(1, 16), seeds, st.sampled_from([0.01, 0.1, 0.5, 2.0]), st.sampled_from([torch.float32, torch.float64]))
def test_reference_matches_float64(B, seed, beta, dtype):
    pc, pr, rc, rr = four(B, seed, dtype)
    loss, meta = dpo_loss(pc, pr, rc, rr, beta)
    assert loss.shape == () and loss.dtype == dtype
    tol = 1e-5 if dtype == torch.float32 else 1e-12
    torch.testing.assert_close(loss.double(), loss_float64(pc, pr, rc, rr, beta), atol=tol, rtol=tol)
    torch.testing.assert_close(meta["chosen_rewards"], beta * (pc - rc))
    torch.testing.assert_close(meta["rejected_rewards"], beta * (pr - rr))
    margins = beta * ((pc - rc) - (pr - rr))
    torch.testing.assert_close(meta["reward_margin"], margins.mean())
    assert float(meta["reward_accuracy"]) == pytest.approx(float((margins > 0).double().mean()))


@PROPERTY_SETTINGS
@given(st.integers(1, 16), seeds, st.sampled_from([0.1, 2.0]))
def test_reference_gradient_is_beta_sigmoid_of_minus_the_margin_and_none_reaches_the_reference(B, seed, beta):
    pc, pr, rc, rr = (t.requires_grad_() for t in four(B, seed, torch.float64))
    loss, meta = dpo_loss(pc, pr, rc, rr, beta)
    loss.backward()
    x = beta * ((pc - rc) - (pr - rr)).detach()
    torch.testing.assert_close(pc.grad, -beta * torch.sigmoid(-x) / B)
    torch.testing.assert_close(pr.grad, beta * torch.sigmoid(-x) / B)
    assert rc.grad is None and rr.grad is None
    assert not meta["chosen_rewards"].requires_grad and not meta["rejected_rewards"].requires_grad


def test_reference_first_step_is_log_2_and_a_tie_is_no_win():
    pc, pr, _, _ = four(5, 3)
    loss, meta = dpo_loss(pc, pr, pc.clone(), pr.clone(), 0.1)
    assert loss.item() == pytest.approx(math.log(2))
    assert float(meta["reward_margin"]) == 0.0 and float(meta["reward_accuracy"]) == 0.0


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("x", [-1000.0, -200.0, 200.0, 1000.0])
def test_reference_extreme_margins_are_finite(dtype, x):
    pc = torch.tensor([-10.0], dtype=dtype, requires_grad=True)
    rc = torch.tensor([-10.0 - x], dtype=dtype)
    pr, rr = torch.tensor([-5.0], dtype=dtype, requires_grad=True), torch.tensor([-5.0], dtype=dtype)
    loss, _ = dpo_loss(pc, pr, rc, rr, 1.0)
    loss.backward()
    assert loss.item() == pytest.approx(max(-x, 0.0), abs=1e-6)
    assert torch.isfinite(pc.grad).all() and torch.isfinite(pr.grad).all()


def test_reference_rejects_bad_shapes_and_beta():
    pc, pr, rc, rr = four(4, 0)
    with pytest.raises(ValueError, match="ref_rejected_log_probs"):
        dpo_loss(pc, pr, rc, rr[:3], 0.1)
    with pytest.raises(ValueError, match="ref_chosen_log_probs"):
        dpo_loss(pc, pr, rc[:1], rr, 0.1)  # (1,) would broadcast
    with pytest.raises(ValueError, match="policy_chosen_log_probs"):
        dpo_loss(pc[:, None], pr[:, None], rc[:, None], rr[:, None], 0.1)
    for beta in (0.0, -0.1):
        with pytest.raises(ValueError, match="beta"):
            dpo_loss(pc, pr, rc, rr, beta)
