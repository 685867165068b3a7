"""ppo_microbatch_train_step (notebook 11): the reference's contract. Its correct versions and known
mistakes are in grader.py (tests/test_graded.py runs them through the judge).
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, strategies as st

from course_lib import grpo_microbatch_train_step, ppo_microbatch_train_step
from tests.helpers import PROPERTY_SETTINGS, rand_mask, randn, seeds


def batch(seed, B=3, T=6, dtype=torch.float32):
    """Leaves for the actor and the critic, the rollout's tensors, a mask with a response in every row.

    V in [2, 4] and V_old within 0.9 of it: V - V_old is exact (Sterbenz), so V_old + clamp(V - V_old)
    is V itself wherever the clip is inactive. (Elsewhere the reference's rounding of that sum can make
    the clipped value term "strictly larger" on an unclipped token: see value_clip_fraction.)"""
    logp = (randn(B, T, seed=seed, dtype=dtype) * 0.3 - 1).requires_grad_()
    values = (3 + (randn(B, T, seed=seed + 1, dtype=torch.float64) * 0.5).clamp(-1, 1)).to(dtype).requires_grad_()
    mask = rand_mask(B, T, seed=seed)
    mask[:, 0] = True
    rollout = {
        "advantages": randn(B, T, seed=seed + 2, dtype=dtype),
        "old_log_probs": logp.detach() + randn(B, T, seed=seed + 3, dtype=dtype) * 0.3,
        "old_values": values.detach() + (randn(B, T, seed=seed + 4, dtype=torch.float64) * 0.3).clamp(-0.9, 0.9).to(dtype),
        "returns": values.detach() + randn(B, T, seed=seed + 5, dtype=dtype),
    }
    return logp, values, mask, rollout


def step_float64(logp, values, mask, k, *, advantages, old_log_probs, old_values, returns, cliprange, cliprange_value,
                 vf_coef):
    """Independent, in float64: row by row for the actor, the kept tokens selected for the critic;
    (loss, metadata, grad of log-probs, grad of values)."""
    lp = logp.detach().double().requires_grad_()
    v = values.detach().double().requires_grad_()
    keep = mask.bool()
    a, old, v_old, r = advantages.double(), old_log_probs.double(), old_values.double(), returns.double()
    ratio = torch.exp(lp - old)
    unclipped, clipped = ratio * a, ratio.clamp(1 - cliprange, 1 + cliprange) * a
    per_token = -torch.minimum(unclipped, clipped)
    policy = torch.stack([row[m].mean() for row, m in zip(per_token, keep)]).mean()
    v_clip = torch.minimum(torch.maximum(v, v_old - cliprange_value), v_old + cliprange_value)
    sq, sq_clip = (v - r) ** 2, (v_clip - r) ** 2
    value = 0.5 * torch.maximum(sq, sq_clip)[keep].mean()
    loss = (policy + vf_coef * value) / k
    loss.backward()
    meta = {"policy_loss": policy.item(), "value_loss": value.item(),
            "clip_fraction": (clipped < unclipped)[keep].double().mean().item(),
            "value_clip_fraction": (sq_clip > sq)[keep].double().mean().item()}
    return loss.item(), meta, lp.grad, v.grad


# ---------------------------------------------------------------- the reference
@PROPERTY_SETTINGS
@given(seeds, st.integers(1, 4), st.sampled_from([0.0, 0.5, 1.0]), st.sampled_from([0.1, 0.2]),
       st.sampled_from([torch.float32, torch.float64]))
def test_reference_matches_float64(seed, k, vf_coef, cliprange_value, dtype):
    logp, values, mask, rollout = batch(seed, dtype=dtype)
    settings = {"cliprange": 0.2, "cliprange_value": cliprange_value, "vf_coef": vf_coef}
    loss, meta = ppo_microbatch_train_step(logp, values, mask, k, **rollout, **settings)
    exp_loss, exp_meta, exp_grad_lp, exp_grad_v = step_float64(logp, values, mask, k, **rollout, **settings)
    assert loss.dtype == dtype and not loss.requires_grad
    tol = 1e-5 if dtype == torch.float32 else 1e-12
    assert abs(loss.item() - exp_loss) < tol
    for key in ("policy_loss", "value_loss"):
        assert abs(float(meta[key]) - exp_meta[key]) < tol, key
    for key in ("clip_fraction", "value_clip_fraction"):  # counts: exact up to float32's rounding of the share
        assert abs(float(meta[key]) - exp_meta[key]) < 1e-6, key
    torch.testing.assert_close(logp.grad.double(), exp_grad_lp, atol=tol, rtol=tol)
    torch.testing.assert_close(values.grad.double(), exp_grad_v, atol=tol, rtol=tol)


def test_reference_accumulates_into_both_grads():
    logp, values, mask, rollout = batch(3)
    settings = {"cliprange": 0.2, "cliprange_value": 0.2, "vf_coef": 0.5}
    ppo_microbatch_train_step(logp, values, mask, 2, **rollout, **settings)
    first_lp, first_v = logp.grad.clone(), values.grad.clone()
    assert first_lp.abs().sum() > 0 and first_v.abs().sum() > 0
    ppo_microbatch_train_step(logp, values, mask, 2, **rollout, **settings)
    torch.testing.assert_close(logp.grad, 2 * first_lp)
    torch.testing.assert_close(values.grad, 2 * first_v)


def test_reference_vf_coef_0_leaves_the_critic_untrained_and_reports_its_loss():
    logp, values, mask, rollout = batch(4)
    loss, meta = ppo_microbatch_train_step(logp, values, mask, 1, **rollout, cliprange=0.2, cliprange_value=0.2,
                                           vf_coef=0.0)
    assert torch.equal(values.grad, torch.zeros_like(values))
    assert meta["value_loss"].item() > 0
    assert loss.item() == pytest.approx(meta["policy_loss"].item())


@PROPERTY_SETTINGS
@given(seeds, st.integers(1, 3))
def test_reference_with_one_advantage_per_row_is_grpo_clip(seed, k):
    """PPO and GRPO differ in the advantages alone: a row's advantage on each of its tokens gives 07's step."""
    logp, values, mask, rollout = batch(seed)
    a = randn(3, 1, seed=seed + 9)
    rollout["advantages"] = a.expand(3, 6).clone()
    loss, meta = ppo_microbatch_train_step(logp, values, mask, k, **rollout, cliprange=0.2, cliprange_value=0.2,
                                           vf_coef=0.0)
    twin = logp.detach().clone().requires_grad_()
    grpo_loss, grpo_meta = grpo_microbatch_train_step(twin, mask, k, "grpo_clip", advantages=a,
                                                      old_log_probs=rollout["old_log_probs"], cliprange=0.2)
    torch.testing.assert_close(loss, grpo_loss)
    torch.testing.assert_close(logp.grad, twin.grad)
    assert torch.equal(meta["clip_fraction"], grpo_meta["clip_fraction"])


def test_reference_fractions_count_response_tokens_only():
    # one response token, clipped (ratio e^0.5 > 1.2 with A > 0) and value-clipped (V far above V_old + c,
    # R beyond V); the padding token is clipped too and must not count
    logp = torch.zeros(1, 2, requires_grad=True)
    values = torch.full((1, 2), 2.0, requires_grad=True)
    mask = torch.tensor([[True, False]])
    _, meta = ppo_microbatch_train_step(
        logp, values, mask, 1, advantages=torch.ones(1, 2), old_log_probs=torch.full((1, 2), -0.5),
        old_values=torch.tensor([[1.0, 1.0]]), returns=torch.tensor([[3.0, 3.0]]), cliprange=0.2,
        cliprange_value=0.2, vf_coef=0.5)
    assert meta["clip_fraction"].item() == 1.0 and meta["value_clip_fraction"].item() == 1.0
    mask = torch.tensor([[True, True]])
    _, meta = ppo_microbatch_train_step(
        logp, values, mask, 1, advantages=torch.tensor([[1.0, -1.0]]), old_log_probs=torch.full((1, 2), -0.5),
        old_values=torch.tensor([[1.0, 1.0]]), returns=torch.tensor([[3.0, 0.0]]), cliprange=0.2,
        cliprange_value=0.2, vf_coef=0.5)
    # token 2: A < 0 with a ratio above 1 + eps (not clipped); R below V_old (the unclipped term is the larger)
    assert meta["clip_fraction"].item() == 0.5 and meta["value_clip_fraction"].item() == 0.5


def test_reference_rejects_bad_shapes():
    logp, values, mask, rollout = batch(5)
    rollout["returns"] = torch.zeros(3, 5)
    with pytest.raises(ValueError, match="returns"):
        ppo_microbatch_train_step(logp, values, mask, 1, **rollout, cliprange=0.2, cliprange_value=0.2, vf_coef=0.5)
