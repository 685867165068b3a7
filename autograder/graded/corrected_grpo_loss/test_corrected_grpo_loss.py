"""corrected_grpo_loss (notebook 15): the reference's contract. Its correct versions and known mistakes
are in grader.py (tests/test_graded.py runs them through the judge).
"""

from __future__ import annotations

import math
import pytest
import torch
from hypothesis import assume, given, strategies as st

from course_lib import corrected_grpo_loss, importance_weights, masked_mean
from course_lib.grpo import compute_grpo_clip_loss
from tests.helpers import mask_of, PROPERTY_SETTINGS, randn, response_runs, seeds, with_garbage


MODES = ("token_truncate", "token_mask", "sequence_truncate", "sequence_mask")
modes = st.sampled_from(MODES)


def batch(run, seed, dtype=torch.float64):
    """(advantages, policy, old, rollout, mask): log(pi / pi_old) and log(pi_old / pi_rollout) of
    spread 0.3 and 0.5, garbage in rollout where the mask is 0."""
    T, spans = run
    B = len(spans)
    mask = mask_of(T, spans)
    old = -randn(B, T, seed=seed, dtype=torch.float64).abs() - 0.1
    policy = old + randn(B, T, seed=seed + 1, dtype=torch.float64, scale=0.3)
    rollout = with_garbage(old - randn(B, T, seed=seed + 2, dtype=torch.float64, scale=0.5), mask, seed)
    adv = randn(B, 1, seed=seed + 3, dtype=torch.float64)
    return adv.to(dtype), policy.to(dtype), old.to(dtype), rollout.to(dtype), mask


def by_hand(adv, policy, old, rollout, spans, mode, cap, eps, aggregate):
    """Python floats: each row's kept tokens, their weighted clipped losses, the row mean, the batch mean."""
    w = importance_weights(old, rollout, mask_of(policy.shape[1], spans), mode, cap, aggregate).tolist()
    rows, kept_n, clipped_n = [], 0, 0
    for b, (start, n) in enumerate(spans):
        a, terms = float(adv[b, 0]), []
        for t in range(start, start + n):
            if mode.endswith("mask") and w[b][t] == 0:
                continue
            r = math.exp(float(policy[b, t]) - float(old[b, t]))
            clipped = min(max(r, 1 - eps), 1 + eps) * a
            terms.append(-w[b][t] * min(r * a, clipped))
            clipped_n += clipped < r * a
        kept_n += len(terms)
        rows.append(sum(terms) / len(terms) if terms else 0.0)
    total = sum(n for _, n in spans)
    return sum(rows) / len(rows), kept_n / max(total, 1), clipped_n / max(kept_n, 1)


# ---------------------------------------------------------------- the reference
@PROPERTY_SETTINGS
@given(response_runs(), seeds, modes, st.sampled_from([1.5, 2.0]), st.sampled_from([0.1, 0.2]),
       st.sampled_from(["sum", "mean"]), st.sampled_from([torch.float32, torch.float64]))
def test_reference_matches_the_loss_by_hand(run, seed, mode, cap, eps, aggregate, dtype):
    T, spans = run
    adv, policy, old, rollout, mask = batch(run, seed, dtype)
    loss, meta = corrected_grpo_loss(adv, policy, old, rollout, mask, eps, mode, cap, aggregate)
    expected, kept_fraction, clip_fraction = by_hand(adv.double(), policy.double(), old.double(), rollout.double(), spans,
                                                     mode, cap, eps, aggregate)
    assert loss.shape == () and loss.dtype == dtype
    tol = 1e3 * torch.finfo(dtype).eps
    assert abs(float(loss) - expected) <= tol * (1 + abs(expected))
    if dtype == torch.float64:  # in float32 a clip decision or a weight at the cap may fall on the other side
        assert float(meta["kept_fraction"]) == pytest.approx(kept_fraction, abs=1e-12)
        assert float(meta["clip_fraction"]) == pytest.approx(clip_fraction, abs=1e-12)
    torch.testing.assert_close(meta["weights"], importance_weights(old, rollout, mask, mode, cap, aggregate))


@PROPERTY_SETTINGS
@given(response_runs(), seeds, modes, st.sampled_from(["sum", "mean"]))
def test_reference_gradient_is_the_weighted_unclipped_policy_gradient(run, seed, mode, aggregate):
    T, spans = run
    adv, policy, old, rollout, mask = batch(run, seed)
    policy.requires_grad_()
    rollout.requires_grad_()
    loss, meta = corrected_grpo_loss(adv, policy, old, rollout, mask, 0.2, mode, 2.0, aggregate)
    loss.backward()
    w = meta["weights"]
    kept = mask & (w > 0) if mode.endswith("mask") else mask
    ratio = torch.exp(policy.detach() - old)
    _, clip = compute_grpo_clip_loss(adv, policy.detach(), old, 0.2)
    count = kept.sum(-1, keepdim=True).clamp(min=1)
    expected = torch.where(kept & ~clip["clipped"], -w * adv * ratio / count / len(spans), 0.0)
    torch.testing.assert_close(policy.grad, expected)
    assert rollout.grad is None


@PROPERTY_SETTINGS
@given(response_runs(), seeds, st.sampled_from(["token_truncate", "sequence_truncate"]))
def test_reference_on_policy_rollouts_give_the_grpo_loss(run, seed, mode):
    """rollout = old: every weight is 1, and the loss is GRPO's per-row masked mean, averaged."""
    T, spans = run
    assume(all(n for _, n in spans))
    adv, policy, old, _, mask = batch(run, seed)
    loss, meta = corrected_grpo_loss(adv, policy, old, old.clone(), mask, 0.2, mode, 2.0)
    per_token, _ = compute_grpo_clip_loss(adv, policy, old, 0.2)
    torch.testing.assert_close(loss, masked_mean(per_token, mask, dim=-1).mean())
    assert meta["kept_fraction"] == 1.0 and torch.equal(meta["weights"], mask.double())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_reference_all_rejected_gives_0_and_a_zero_gradient(dtype):
    adv, policy, old, _, mask = batch((6, [(1, 3), (0, 6), (2, 2)]), 4, dtype)
    policy.requires_grad_()
    loss, meta = corrected_grpo_loss(adv, policy, old, old - 5.0, mask, 0.2, "sequence_mask", 2.0)
    loss.backward()
    assert loss.item() == 0.0 and not policy.grad.any()
    assert meta["kept_fraction"] == 0.0 and meta["clip_fraction"] == 0.0 and not meta["weights"].any()


def test_reference_a_rejected_token_leaves_its_row_s_denominator():
    adv = torch.tensor([[1.0]])
    old = torch.zeros(1, 3)
    loss, meta = corrected_grpo_loss(adv, old.clone(), old, torch.tensor([[0.0, -2.0, 0.0]]), torch.ones(1, 3), 0.2,
                                     "token_mask", 2.0)
    assert loss.item() == -1.0 and meta["kept_fraction"].item() == pytest.approx(2 / 3)


def test_reference_rejects_bad_input():
    x, m = torch.zeros(2, 3), torch.ones(2, 3)
    with pytest.raises(ValueError, match="policy_log_probs"):
        corrected_grpo_loss(torch.zeros(2, 1), torch.zeros(2, 4), x, x, m, 0.2, "token_mask", 2.0)
    with pytest.raises(ValueError, match="mode"):
        corrected_grpo_loss(torch.zeros(2, 1), x, x, x, m, 0.2, "token", 2.0)
    with pytest.raises(ValueError, match="cap"):
        corrected_grpo_loss(torch.zeros(2, 1), x, x, x, m, 0.2, "token_mask", -1.0)
