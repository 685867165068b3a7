"""compute_grpo_clip_loss (notebook 07): the reference's contract, correct versions that earn full
marks through the real judge, and realistic mistakes that lose them (CONTRIBUTING.md, "Adding a
graded function")."""

from __future__ import annotations

import torch
from hypothesis import given
from hypothesis import strategies as st

from autograder.mistakes.compute_grpo_clip_loss import MINIMUM
from course_lib import compute_grpo_clip_loss
from tests.helpers import PROPERTY_SETTINGS, corpus_tests, many_draws_test, randn, seeds

SUITE = "compute_grpo_clip_loss"


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


# ---------------------------------------------------------------- correct versions and mistakes
CORRECT = {
    "minimum_of_two_terms": MINIMUM,
    # A >= 0: the objective is min(ratio, 1 + eps) * A; A < 0: max(ratio, 1 - eps) * A
    "where_on_the_sign_of_A": """
        import torch
        def compute_grpo_clip_loss(advantages, policy_log_probs, old_log_probs, cliprange):
            A = advantages if advantages.dim() == 2 else advantages[:, None]
            ratio = (policy_log_probs - old_log_probs).exp()
            positive = (A >= 0).expand_as(ratio)
            capped = torch.where(positive, ratio.clamp(max=1 + cliprange), ratio.clamp(min=1 - cliprange))
            clipped = torch.where(positive, ratio > 1 + cliprange, ratio < 1 - cliprange) & (A != 0)
            return -capped * A, {"clipped": clipped}
    """,
    "float64_inside": """
        import torch
        def compute_grpo_clip_loss(advantages, policy_log_probs, old_log_probs, cliprange):
            dtype = policy_log_probs.dtype
            A = advantages.double().view(-1, 1)
            ratio = torch.exp(policy_log_probs.double() - old_log_probs.double())
            surr1 = ratio * A
            surr2 = ratio.clamp(1 - cliprange, 1 + cliprange) * A
            loss = -torch.min(surr1, surr2)
            return loss.to(dtype), {"clipped": surr2 < surr1, "ratio": ratio.detach().to(dtype)}
    """,
    "min_max_instead_of_clamp": """
        import torch
        def compute_grpo_clip_loss(advantages, policy_log_probs, old_log_probs, cliprange):
            adv = advantages.unsqueeze(-1) if advantages.dim() == 1 else advantages
            ratio = torch.exp(policy_log_probs - old_log_probs)
            upper = torch.full_like(ratio, 1 + cliprange)
            lower = torch.full_like(ratio, 1 - cliprange)
            clipped_ratio = torch.maximum(torch.minimum(ratio, upper), lower)
            obj = torch.stack([ratio * adv, clipped_ratio * adv]).min(dim=0).values
            return -obj, {"clipped": clipped_ratio * adv < ratio * adv}
    """,
    # exp(a) / exp(b) is 0/0 below -104 in float32; shifted by the larger of the two it never underflows
    # (the ratio does not depend on the shift, so the shift needs no gradient)
    "ratio_of_shifted_exps": """
        import torch
        def compute_grpo_clip_loss(advantages, policy_log_probs, old_log_probs, cliprange):
            adv = advantages.reshape(len(advantages), 1)
            shift = torch.maximum(policy_log_probs, old_log_probs).detach()
            ratio = torch.exp(policy_log_probs - shift) / torch.exp(old_log_probs - shift)
            unclipped = ratio * adv
            clipped = ratio.clamp(1 - cliprange, 1 + cliprange) * adv
            loss = -torch.where(clipped < unclipped, clipped, unclipped)
            return loss, {"clipped": clipped < unclipped}
    """,
}


# catalogued mistakes written another way: recognition is about what a function does, not its text
SAME_MISTAKES = {
    # the inverted ratio computed in float64 and cast back
    "inverted_ratio_in_float64": ("ratio_inverted", """
        import torch
        def compute_grpo_clip_loss(advantages, policy_log_probs, old_log_probs, cliprange):
            A = advantages.double().reshape(-1, 1)
            ratio = torch.exp(old_log_probs.double() - policy_log_probs.double())
            surr1, surr2 = ratio * A, ratio.clamp(1 - cliprange, 1 + cliprange) * A
            return -torch.min(surr1, surr2).to(policy_log_probs.dtype), {"clipped": surr2 < surr1}
    """),
    # no clip, row by row
    "unclipped_loop_over_rows": ("no_clip", """
        import torch
        def compute_grpo_clip_loss(advantages, policy_log_probs, old_log_probs, cliprange):
            a = advantages.reshape(-1)
            rows = [-torch.exp(policy_log_probs[b] - old_log_probs[b]) * a[b] for b in range(len(a))]
            loss = torch.stack(rows)
            return loss, {"clipped": torch.zeros(loss.shape, dtype=torch.bool)}
    """),
}

test_correct_version_earns_full_marks, test_mistake_loses_its_points = corpus_tests(SUITE, CORRECT, SAME_MISTAKES)
test_each_version_holds_on_many_draws = many_draws_test(SUITE, CORRECT, same_mistakes=SAME_MISTAKES)
