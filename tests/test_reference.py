"""The reference implementations against independent float64 computations and their edge cases."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from course_lib import (
    compute_entropy,
    compute_group_normalized_rewards,
    compute_grpo_clip_loss,
    compute_naive_policy_gradient_loss,
    compute_policy_gradient_loss,
    final_logits_softcap,
    get_response_log_probs,
    grpo_microbatch_train_step,
    log_probs_from_logits,
    masked_mean,
    masked_normalize,
    sft_microbatch_train_step,
)
from course_lib import logprobs as logprobs_module

SETTINGS = settings(max_examples=40, deadline=None)
shapes = st.tuples(st.integers(1, 4), st.integers(1, 6), st.integers(1, 9))
seeds = st.integers(0, 2**31 - 1)


def randn(*shape, seed=0, dtype=torch.float32, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=g, dtype=torch.float64) * scale).to(dtype)


def rand_mask(*shape, seed=0, p=0.6):
    g = torch.Generator().manual_seed(seed + 1)
    return torch.rand(*shape, generator=g) < p


# ---------------------------------------------------------------- entropy


def entropy_float64(logits):
    """Independent: the definition on exact-ish probabilities from mpmath-free float64 shifts."""
    x = logits.double()
    x = x - x.max(dim=-1, keepdim=True).values
    p = x.exp() / x.exp().sum(-1, keepdim=True)
    logp = x - x.exp().sum(-1, keepdim=True).log()
    return -(torch.where(p > 0, p * logp, torch.zeros_like(p))).sum(-1)


@SETTINGS
@given(shapes, seeds, st.sampled_from([1.0, 10.0, 1e4]))
def test_entropy_matches_float64(shape, seed, scale):
    logits = randn(*shape, seed=seed, scale=scale)
    got = compute_entropy(logits)
    assert got.shape == shape[:-1]
    assert torch.isfinite(got).all()
    torch.testing.assert_close(got.double(), entropy_float64(logits), atol=1e-5, rtol=1e-5)


def test_entropy_uniform_and_one_hot():
    assert torch.allclose(compute_entropy(torch.zeros(2, 7)), torch.full((2,), math.log(7)))
    peaked = torch.tensor([[1e4, -1e4, 0.0]])
    assert compute_entropy(peaked).item() == 0.0


def test_entropy_large_float32_logits_are_finite_and_exact():
    logits = torch.tensor([[1e4, 1e4 - 1.0, -1e4, 3.0]], dtype=torch.float32)
    got = compute_entropy(logits)
    p = torch.tensor([1.0, math.exp(-1.0)], dtype=torch.float64)
    p = p / p.sum()
    expected = -(p * p.log()).sum()
    assert torch.isfinite(got).all()
    assert abs(got.item() - expected.item()) < 1e-6


def test_entropy_low_precision_is_computed_in_float32():
    logits = randn(3, 50, seed=3, scale=5.0)
    got = compute_entropy(logits.to(torch.bfloat16))
    assert got.dtype == torch.float32
    torch.testing.assert_close(got.double(), entropy_float64(logits.to(torch.bfloat16)), atol=1e-5, rtol=1e-5)


# ---------------------------------------------------------------- log-probs


class FixedLogits(torch.nn.Module):
    """A real module whose forward returns given logits (scaled by a learnable scalar)."""

    def __init__(self, logits):
        super().__init__()
        self.logits = torch.nn.Parameter(logits.clone())

    def forward(self, input_ids):
        assert input_ids.shape == self.logits.shape[:2]
        return type("Out", (), {"logits": self.logits})()


@SETTINGS
@given(shapes, seeds)
def test_log_probs_match_float64_log_softmax(shape, seed):
    B, T, V = shape
    logits = randn(B, T, V, seed=seed, scale=3.0)
    labels = torch.randint(0, V, (B, T), generator=torch.Generator().manual_seed(seed))
    out = get_response_log_probs(FixedLogits(logits), torch.zeros(B, T, dtype=torch.long), labels, True)
    expected = torch.log_softmax(logits.double(), -1).gather(-1, labels[..., None]).squeeze(-1)
    torch.testing.assert_close(out["log_probs"].double(), expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(out["token_entropy"].double(), entropy_float64(logits), atol=1e-5, rtol=1e-5)
    assert out["log_probs"].shape == (B, T)


def test_log_probs_without_entropy_returns_none():
    logits = randn(2, 3, 5)
    out = get_response_log_probs(FixedLogits(logits), torch.zeros(2, 3, dtype=torch.long), torch.zeros(2, 3, dtype=torch.long))
    assert out["token_entropy"] is None


def test_log_probs_gradient_matches_autograd_in_float64(monkeypatch):
    # a tiny chunk forces many chunks, so chunk boundaries are exercised
    monkeypatch.setattr(logprobs_module, "CHUNK_ELEMENTS", 7)
    logits = randn(3, 4, 5, seed=1, dtype=torch.float64, scale=2.0).requires_grad_()
    labels = torch.randint(0, 5, (3, 4), generator=torch.Generator().manual_seed(2))
    assert torch.autograd.gradcheck(lambda x: log_probs_from_logits(x, labels), (logits,))
    weights = randn(3, 4, seed=5, dtype=torch.float64)
    (log_probs_from_logits(logits, labels) * weights).sum().backward()
    ref = logits.detach().clone().requires_grad_()
    (torch.log_softmax(ref, -1).gather(-1, labels[..., None]).squeeze(-1) * weights).sum().backward()
    torch.testing.assert_close(logits.grad, ref.grad)


def test_log_probs_large_logits_finite():
    logits = randn(2, 3, 11, seed=4, scale=1e4)
    labels = torch.randint(0, 11, (2, 3), generator=torch.Generator().manual_seed(0))
    got = log_probs_from_logits(logits, labels)
    expected = torch.log_softmax(logits.double(), -1).gather(-1, labels[..., None]).squeeze(-1)
    assert torch.isfinite(got).all()
    torch.testing.assert_close(got.double(), expected, atol=1e-2, rtol=1e-6)


def test_log_probs_bf16_logits_are_scored_in_float32():
    logits = randn(2, 3, 40, seed=6, scale=4.0).to(torch.bfloat16)
    labels = torch.randint(0, 40, (2, 3), generator=torch.Generator().manual_seed(1))
    got = log_probs_from_logits(logits, labels)
    assert got.dtype == torch.float32
    expected = torch.log_softmax(logits.double(), -1).gather(-1, labels[..., None]).squeeze(-1)
    torch.testing.assert_close(got.double(), expected, atol=1e-5, rtol=1e-5)


# ---------------------------------------------------------------- masked reductions


@SETTINGS
@given(shapes, seeds, st.sampled_from([None, 0, 1, -1]), st.sampled_from([1.0, 42.0, 0.5]))
def test_masked_normalize_matches_float64(shape, seed, dim, constant):
    x = randn(*shape, seed=seed)
    m = rand_mask(*shape, seed=seed)
    got = masked_normalize(x, m, dim=dim, normalize_constant=constant)
    xs = (x.double() * m.double())
    expected = (xs.sum() if dim is None else xs.sum(dim)) / constant
    torch.testing.assert_close(got.double(), expected, atol=1e-6, rtol=1e-6)


@SETTINGS
@given(shapes, seeds, st.sampled_from([None, 0, 1, -1]))
def test_masked_mean_matches_float64(shape, seed, dim):
    x = randn(*shape, seed=seed)
    m = rand_mask(*shape, seed=seed)
    got = masked_mean(x, m, dim=dim)
    xs, md = x.double() * m.double(), m.double()
    expected = xs.sum() / md.sum() if dim is None else xs.sum(dim) / md.sum(dim)
    torch.testing.assert_close(got.double(), expected, atol=1e-6, rtol=1e-6, equal_nan=True)


def test_masked_reductions_empty_mask():
    x = randn(2, 3)
    empty = torch.zeros(2, 3, dtype=torch.bool)
    assert masked_normalize(x, empty).item() == 0.0
    assert torch.equal(masked_normalize(x, empty, dim=1), torch.zeros(2))
    assert torch.isnan(masked_mean(x, empty)).item()
    assert torch.isnan(masked_mean(x, empty, dim=1)).all()


def test_masked_reductions_ignore_non_finite_values_under_the_mask():
    x = torch.tensor([[1.0, -math.inf, 3.0]])
    m = torch.tensor([[1, 0, 1]])
    assert masked_normalize(x, m).item() == 4.0
    assert masked_mean(x, m).item() == 2.0


def test_masked_reductions_accept_float_and_int_masks():
    x = randn(3, 4, seed=2)
    mb = rand_mask(3, 4, seed=2)
    for m in (mb.float(), mb.long()):
        assert torch.equal(masked_normalize(x, m, dim=1, normalize_constant=42.0), masked_normalize(x, mb, dim=1, normalize_constant=42.0))
        assert torch.equal(masked_mean(x, m, dim=0), masked_mean(x, mb, dim=0))


# ---------------------------------------------------------------- SFT step


@pytest.mark.parametrize("constant", [1.0, 42.0])
@pytest.mark.parametrize("gas", [1, 3])
def test_sft_step_loss_and_gradient(constant, gas):
    logp = (-randn(4, 6, seed=7).abs()).requires_grad_()
    mask = rand_mask(4, 6, seed=7)
    loss, meta = sft_microbatch_train_step(logp, mask, gas, constant)
    expected = (-(logp.detach().double() * mask).sum(-1) / constant).mean() / gas
    assert abs(loss.item() - expected.item()) < 1e-6
    # d loss / d logp[b, t] = -mask / (constant * B * gas)
    torch.testing.assert_close(logp.grad, -mask.float() / (constant * 4 * gas))
    assert meta["response_tokens"].item() == mask.sum().item()


def test_sft_step_accumulates_into_grad():
    logp = (-randn(2, 5, seed=8).abs()).requires_grad_()
    mask = rand_mask(2, 5, seed=8)
    sft_microbatch_train_step(logp, mask, 2, 42.0)
    first = logp.grad.clone()
    sft_microbatch_train_step(logp, mask, 2, 42.0)
    torch.testing.assert_close(logp.grad, 2 * first)


def test_sft_accumulated_micro_batches_equal_the_full_batch_gradient():
    torch.manual_seed(0)
    layer = torch.nn.Linear(5, 7)
    x = torch.randn(8, 3, 5)
    labels = torch.randint(0, 7, (8, 3))
    mask = rand_mask(8, 3, seed=9)

    def logp(xb, lb):
        return torch.log_softmax(layer(xb), -1).gather(-1, lb[..., None]).squeeze(-1)

    sft_microbatch_train_step(logp(x, labels), mask, 1, 42.0)
    full = layer.weight.grad.clone()
    layer.zero_grad()
    for i in range(4):
        sl = slice(2 * i, 2 * i + 2)
        sft_microbatch_train_step(logp(x[sl], labels[sl]), mask[sl], 4, 42.0)
    torch.testing.assert_close(layer.weight.grad, full)


# ---------------------------------------------------------------- group advantages


def reward_by_value(response, ground_truth):
    r = float(response == ground_truth)
    return {"reward": r, "format_reward": 1.0, "answer_reward": r}


def numeric_reward(response, ground_truth):
    return {"reward": float(response), "format_reward": 1.0, "answer_reward": 0.0}


@SETTINGS
@given(st.integers(1, 5), st.integers(2, 6), seeds, st.booleans(), st.sampled_from([1e-6, 0.1]))
def test_group_advantages_match_float64(n_groups, group_size, seed, use_std, eps):
    g = torch.Generator().manual_seed(seed)
    rewards = torch.randint(0, 4, (n_groups * group_size,), generator=g).double() / 2
    responses = [str(r.item()) for r in rewards]
    adv, raw, meta = compute_group_normalized_rewards(numeric_reward, responses, ["x"] * len(responses), group_size, eps, use_std)
    grouped = rewards.view(n_groups, group_size)
    centered = grouped - grouped.mean(1, keepdim=True)
    expected = centered / (grouped.std(1, keepdim=True) + eps) if use_std else centered
    torch.testing.assert_close(adv.double(), expected.view(-1), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(raw.double(), rewards)
    assert adv.shape == raw.shape == (n_groups * group_size,)
    assert abs(meta["reward_mean"] - rewards.mean().item()) < 1e-6


@pytest.mark.parametrize("eps", [1e-6, 0.0])
@pytest.mark.parametrize("use_std", [True, False])
def test_constant_reward_groups_get_zero_advantage_not_nan(eps, use_std):
    responses = ["a", "a", "a", "b", "a", "b"]
    gts = ["a", "a", "a", "a", "a", "a"]
    adv, raw, meta = compute_group_normalized_rewards(reward_by_value, responses, gts, 3, eps, use_std)
    assert not torch.isnan(adv).any()
    assert torch.equal(adv[:3], torch.zeros(3))
    assert adv[3:].abs().sum() > 0
    assert meta["zero_std_group_fraction"] == 0.5


def test_group_size_one_gives_zero_advantage():
    adv, _, _ = compute_group_normalized_rewards(reward_by_value, ["a", "b"], ["a", "a"], 1, 1e-6, True)
    assert torch.equal(adv, torch.zeros(2))


def test_group_advantages_bad_sizes_are_clear_errors():
    with pytest.raises(ValueError, match="groups of group_size=4"):
        compute_group_normalized_rewards(reward_by_value, ["a"] * 6, ["a"] * 6, 4, 1e-6, True)
    with pytest.raises(ValueError, match="ground truths"):
        compute_group_normalized_rewards(reward_by_value, ["a"] * 4, ["a"] * 3, 2, 1e-6, True)


# ---------------------------------------------------------------- policy-gradient losses


def test_naive_pg_loss_and_gradient():
    adv = randn(3, 1, seed=10)
    logp = randn(3, 4, seed=11).requires_grad_()
    loss = compute_naive_policy_gradient_loss(adv, logp)
    torch.testing.assert_close(loss, -adv * logp)
    loss.sum().backward()
    torch.testing.assert_close(logp.grad, -adv.expand(3, 4))


def test_naive_pg_loss_never_broadcasts_over_the_batch():
    # (B,) advantages with B == T would silently broadcast along tokens; they are taken per row
    adv = torch.tensor([1.0, 2.0, 3.0])
    logp = torch.ones(3, 3)
    torch.testing.assert_close(compute_naive_policy_gradient_loss(adv, logp), -adv[:, None].expand(3, 3))
    with pytest.raises(ValueError, match=r"\(B, 1\)"):
        compute_naive_policy_gradient_loss(torch.ones(3, 2), logp)


@SETTINGS
@given(seeds, st.sampled_from([0.1, 0.2, 0.5]))
def test_grpo_clip_matches_float64(seed, eps):
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


def test_grpo_clip_on_policy_is_the_pg_gradient():
    adv = torch.tensor([[1.5], [-0.5]])
    logp = randn(2, 3, seed=12).requires_grad_()
    loss, meta = compute_grpo_clip_loss(adv, logp, logp.detach(), 0.2)
    torch.testing.assert_close(loss, -adv.expand(2, 3))  # ratio 1: loss is -A
    loss.sum().backward()
    torch.testing.assert_close(logp.grad, -adv.expand(2, 3))  # ...but the gradient is not 0
    assert not meta["clipped"].any()


def test_policy_gradient_dispatcher():
    logp = randn(2, 3, seed=13)
    r = torch.tensor([[1.0], [0.0]])
    a = torch.tensor([[0.5], [-0.5]])
    loss, _ = compute_policy_gradient_loss(logp, "no_baseline", raw_rewards=r)
    torch.testing.assert_close(loss, -r * logp)
    loss, _ = compute_policy_gradient_loss(logp, "reinforce_with_baseline", advantages=a)
    torch.testing.assert_close(loss, -a * logp)
    loss, meta = compute_policy_gradient_loss(logp, "grpo_clip", advantages=a, old_log_probs=logp, cliprange=0.2)
    torch.testing.assert_close(loss, -a.expand(2, 3))
    assert "clipped" in meta


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"loss_type": "ppo"}, "unknown loss_type 'ppo'"),
        ({"loss_type": "no_baseline"}, "needs raw_rewards"),
        ({"loss_type": "reinforce_with_baseline", "raw_rewards": torch.ones(2, 1)}, "needs advantages"),
        ({"loss_type": "grpo_clip", "advantages": torch.ones(2, 1)}, "needs old_log_probs, cliprange"),
    ],
)
def test_policy_gradient_dispatcher_clear_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        compute_policy_gradient_loss(torch.zeros(2, 3), **kwargs)


# ---------------------------------------------------------------- GRPO step


@pytest.mark.parametrize("loss_type", ["no_baseline", "reinforce_with_baseline", "grpo_clip"])
def test_grpo_step_matches_float64(loss_type):
    B, T, gas = 3, 5, 2
    logp = (randn(B, T, seed=14) * 0.2 - 1).requires_grad_()
    old = logp.detach() + randn(B, T, seed=15) * 0.1
    mask = rand_mask(B, T, seed=16)
    mask[:, 0] = True
    a = randn(B, 1, seed=17)
    loss, meta = grpo_microbatch_train_step(logp, mask, gas, loss_type, raw_rewards=a, advantages=a, old_log_probs=old, cliprange=0.2)

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


def test_grpo_step_accumulates_into_grad():
    logp = randn(2, 4, seed=18).requires_grad_()
    mask = torch.ones(2, 4, dtype=torch.bool)
    a = torch.tensor([[1.0], [-2.0]])
    grpo_microbatch_train_step(logp, mask, 2, "reinforce_with_baseline", advantages=a)
    first = logp.grad.clone()
    grpo_microbatch_train_step(logp, mask, 2, "reinforce_with_baseline", advantages=a)
    torch.testing.assert_close(logp.grad, 2 * first)
    assert first.abs().sum() > 0


def test_grpo_step_invalid_loss_type():
    with pytest.raises(ValueError, match="unknown loss_type"):
        grpo_microbatch_train_step(torch.zeros(1, 2, requires_grad=True), torch.ones(1, 2), 1, "dpo")


# ---------------------------------------------------------------- softcap


@SETTINGS
@given(seeds, st.sampled_from([5.0, 30.0, 50.0]))
def test_softcap_matches_float64(seed, cap):
    x = randn(3, 7, seed=seed, scale=100.0)
    got = final_logits_softcap(x, cap)
    torch.testing.assert_close(got.double(), cap * torch.tanh(x.double() / cap), atol=1e-4, rtol=1e-6)
    assert got.abs().max() <= cap


@pytest.mark.parametrize("cap", [None, 0, 0.0])
def test_softcap_off_is_identity(cap):
    x = randn(2, 3, scale=100.0)
    assert torch.equal(final_logits_softcap(x, cap), x)
