"""compute_gae (notebook 11): the reference's contract. Its correct versions and known mistakes are in
grader.py (tests/test_graded.py runs them through the judge).
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, strategies as st

from course_lib import compute_gae
from tests.helpers import mask_of, PROPERTY_SETTINGS, randn, response_runs, seeds, with_garbage


gammas_lams = st.sampled_from([(1.0, 1.0), (1.0, 0.0), (0.99, 0.95), (0.9, 0.5), (1.0, 0.95), (0.5, 1.0)])


def inputs(run, seed, dtype=torch.float64):
    T, spans = run
    mask = mask_of(T, spans)
    rewards = with_garbage(randn(len(spans), T, seed=seed, dtype=dtype, scale=0.5), mask, seed)
    values = with_garbage(randn(len(spans), T, seed=seed + 1, dtype=dtype), mask, seed + 1)
    return rewards, values, mask


def gae_by_sums(rewards, values, spans, gamma, lam):
    """Independent: float64, each response on its own, A_t = sum_l (gamma lam)^l delta_{t+l}."""
    adv = torch.zeros(rewards.shape, dtype=torch.float64)
    for b, (start, n) in enumerate(spans):
        r, v = rewards[b, start:start + n].double().tolist(), values[b, start:start + n].double().tolist()
        v_next = v[1:] + [0.0]
        delta = [r[i] + gamma * v_next[i] - v[i] for i in range(n)]
        for i in range(n):
            adv[b, start + i] = sum((gamma * lam) ** j * delta[i + j] for j in range(n - i))
    return adv


# ---------------------------------------------------------------- the reference
@PROPERTY_SETTINGS
@given(response_runs(), seeds, gammas_lams, st.sampled_from([torch.float32, torch.float64]),
       st.sampled_from(["bool", "long", "float"]))
def test_reference_is_the_discounted_sum_of_td_residuals(run, seed, gamma_lam, dtype, mask_kind):
    (gamma, lam), (T, spans) = gamma_lam, run
    rewards, values, mask = inputs(run, seed, dtype)
    mk = {"bool": mask, "long": mask.long(), "float": mask.to(dtype)}[mask_kind]
    adv, ret = compute_gae(rewards, values, mk, gamma, lam)
    assert adv.shape == ret.shape == mask.shape and adv.dtype == ret.dtype == dtype
    tol = 64 * T * torch.finfo(dtype).eps
    torch.testing.assert_close(adv.double(), gae_by_sums(rewards, values, spans, gamma, lam), atol=tol, rtol=tol)
    torch.testing.assert_close(ret.double(), torch.where(mask, adv.double() + values.double(), 0.0), atol=tol, rtol=tol)
    assert (adv[~mask] == 0).all() and (ret[~mask] == 0).all()


@PROPERTY_SETTINGS
@given(response_runs(), seeds)
def test_reference_gamma_lam_1_is_the_monte_carlo_return(run, seed):
    T, spans = run
    rewards, values, mask = inputs(run, seed)
    adv, ret = compute_gae(rewards, values, mask, 1.0, 1.0)
    to_go = torch.where(mask, rewards, 0.0).flip(-1).cumsum(-1).flip(-1)  # the sum of the rewards to the end
    torch.testing.assert_close(ret, torch.where(mask, to_go, 0.0))
    torch.testing.assert_close(adv, torch.where(mask, to_go - values, 0.0))


@PROPERTY_SETTINGS
@given(response_runs(), seeds, st.sampled_from([1.0, 0.99, 0.5]))
def test_reference_lam_0_is_the_td_residual(run, seed, gamma):
    rewards, values, mask = inputs(run, seed)
    adv, _ = compute_gae(rewards, values, mask, gamma, 0.0)
    v_next = torch.cat([torch.where(mask, values, 0.0)[:, 1:], torch.zeros(mask.shape[0], 1, dtype=values.dtype)], 1)
    torch.testing.assert_close(adv, torch.where(mask, rewards + gamma * v_next - values, 0.0))


@PROPERTY_SETTINGS
@given(response_runs(), seeds, gammas_lams)
def test_reference_never_reads_outside_the_response(run, seed, gamma_lam):
    rewards, values, mask = inputs(run, seed, torch.float32)
    clean = compute_gae(torch.where(mask, rewards, 0.0), torch.where(mask, values, 0.0), mask, *gamma_lam)
    other = compute_gae(with_garbage(rewards, mask, seed + 11), with_garbage(values, mask, seed + 13), mask, *gamma_lam)
    for a, b, c in zip(compute_gae(rewards, values, mask, *gamma_lam), clean, other):
        assert torch.equal(a, b) and torch.equal(a, c)


def test_reference_one_token_response_does_not_bootstrap():
    rewards = torch.tensor([[9.0, 2.0, 9.0], [9.0, 9.0, 1.0]])
    values = torch.tensor([[9.0, 0.5, 40.0], [9.0, 9.0, 0.25]])
    mask = torch.tensor([[0, 1, 0], [0, 0, 1]])
    adv, ret = compute_gae(rewards, values, mask, 0.99, 0.95)
    assert adv.tolist() == [[0.0, 1.5, 0.0], [0.0, 0.0, 0.75]]
    assert ret.tolist() == [[0.0, 2.0, 0.0], [0.0, 0.0, 1.0]]


@pytest.mark.parametrize(("r_dtype", "v_dtype"), [(torch.float32, torch.float64), (torch.float64, torch.float32),
                                                  (torch.float32, torch.float32)])
def test_reference_dtype_is_the_promotion_of_rewards_and_values(r_dtype, v_dtype):
    mask = torch.tensor([[1, 1, 0]])
    adv, ret = compute_gae(torch.ones(1, 3, dtype=r_dtype), torch.ones(1, 3, dtype=v_dtype), mask, 1.0, 0.95)
    assert adv.dtype == ret.dtype == torch.promote_types(r_dtype, v_dtype)


def test_reference_leaves_its_inputs_unchanged():
    rewards, values, mask = inputs((6, [(1, 3), (0, 6)]), 3, torch.float32)
    before = (rewards.clone(), values.clone())
    compute_gae(rewards, values, mask, 0.99, 0.95)
    assert torch.equal(rewards, before[0]) and torch.equal(values, before[1])


def test_reference_rejects_shapes_that_differ():
    with pytest.raises(ValueError, match="values"):
        compute_gae(torch.zeros(2, 4), torch.zeros(2, 5), torch.ones(2, 4), 1.0, 1.0)
    with pytest.raises(ValueError, match="rewards"):
        compute_gae(torch.zeros(3, 4), torch.zeros(2, 4), torch.ones(2, 4), 1.0, 1.0)
