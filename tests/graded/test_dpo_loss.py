"""dpo_loss (notebook 12): the reference's contract, correct versions that earn full marks through
the real judge, and realistic mistakes that lose them (CONTRIBUTING.md, "Adding a graded function")."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from autograder.mistakes.dpo_loss import BASE
from course_lib import dpo_loss
from tests.helpers import PROPERTY_SETTINGS, corpus_tests, many_draws_test, randn, seeds

SUITE = "dpo_loss"


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


CORRECT = {
    "logsigmoid_detach": BASE,
    # softplus(-x) = -logsigmoid(x); the policies subtracted first; the reference read under no_grad
    "softplus_policies_first": """
        import torch
        import torch.nn.functional as F
        def dpo_loss(policy_chosen_log_probs, policy_rejected_log_probs, ref_chosen_log_probs, ref_rejected_log_probs, beta):
            B = policy_chosen_log_probs.shape
            for name, t in [("policy_rejected", policy_rejected_log_probs), ("ref_chosen", ref_chosen_log_probs),
                            ("ref_rejected", ref_rejected_log_probs), ("policy_chosen", policy_chosen_log_probs)]:
                if t.ndim != 1 or t.shape != B:
                    raise ValueError(f"{name} has shape {tuple(t.shape)}")
            if not beta > 0:
                raise ValueError("beta")
            with torch.no_grad():
                ref_diff = ref_chosen_log_probs - ref_rejected_log_probs
                chosen_rewards = beta * (policy_chosen_log_probs - ref_chosen_log_probs)
                rejected_rewards = beta * (policy_rejected_log_probs - ref_rejected_log_probs)
            logits = beta * ((policy_chosen_log_probs - policy_rejected_log_probs) - ref_diff)
            loss = F.softplus(-logits).mean()
            wins = (chosen_rewards > rejected_rewards).sum().item()
            return loss, {"chosen_rewards": chosen_rewards, "rejected_rewards": rejected_rewards,
                          "reward_margin": (chosen_rewards - rejected_rewards).mean().item(),
                          "reward_accuracy": wins / len(chosen_rewards)}
    """,
    # float64 inside, cast back; a Python-float accuracy from the float64 margins
    "float64_inside": """
        import torch
        import torch.nn.functional as F
        def dpo_loss(policy_chosen_log_probs, policy_rejected_log_probs, ref_chosen_log_probs, ref_rejected_log_probs, beta):
            shapes = {tuple(t.shape) for t in (policy_chosen_log_probs, policy_rejected_log_probs,
                                               ref_chosen_log_probs, ref_rejected_log_probs)}
            if len(shapes) != 1 or len(next(iter(shapes))) != 1:
                raise ValueError(f"shapes {shapes}: four (B,) tensors expected")
            if beta <= 0:
                raise ValueError("beta <= 0")
            dtype = policy_chosen_log_probs.dtype
            pc, pr = policy_chosen_log_probs.double(), policy_rejected_log_probs.double()
            rc, rr = ref_chosen_log_probs.detach().double(), ref_rejected_log_probs.detach().double()
            chosen, rejected = beta * (pc - rc), beta * (pr - rr)
            margins = chosen - rejected
            loss = (-F.logsigmoid(margins)).mean().to(dtype)
            return loss, {"chosen_rewards": chosen.detach().to(dtype), "rejected_rewards": rejected.detach().to(dtype),
                          "reward_margin": margins.detach().mean().to(dtype),
                          "reward_accuracy": float((margins > 0).double().mean())}
    """,
    # one pair at a time, softplus on each margin
    "loop_over_pairs_softplus": """
        import torch
        import torch.nn.functional as F
        def dpo_loss(policy_chosen_log_probs, policy_rejected_log_probs, ref_chosen_log_probs, ref_rejected_log_probs, beta):
            n = policy_chosen_log_probs.shape
            if len(n) != 1:
                raise ValueError("policy_chosen_log_probs must be (B,)")
            for t in (policy_rejected_log_probs, ref_chosen_log_probs, ref_rejected_log_probs):
                if t.shape != n:
                    raise ValueError("all four log-prob tensors must be (B,) alike")
            if beta <= 0:
                raise ValueError("beta must be > 0")
            losses, chosen, rejected = [], [], []
            for pc, pr, rc, rr in zip(policy_chosen_log_probs, policy_rejected_log_probs,
                                      ref_chosen_log_probs.detach(), ref_rejected_log_probs.detach()):
                c, r = beta * (pc - rc), beta * (pr - rr)
                x = c - r
                losses.append(F.softplus(-x))
                chosen.append(c.detach())
                rejected.append(r.detach())
            chosen, rejected = torch.stack(chosen), torch.stack(rejected)
            margin = chosen - rejected
            return torch.stack(losses).mean(), {"chosen_rewards": chosen, "rejected_rewards": rejected,
                                                "reward_margin": margin.mean(),
                                                "reward_accuracy": (margin > 0).to(margin.dtype).mean()}
    """,
}


test_correct_version_earns_full_marks, test_mistake_loses_its_points = corpus_tests(SUITE, CORRECT)
test_each_version_holds_on_many_draws = many_draws_test(SUITE, CORRECT)
