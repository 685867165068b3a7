"""compute_naive_policy_gradient_loss (notebook 07): the reference's contract, correct versions that
earn full marks through the real judge, and realistic mistakes that lose them (CONTRIBUTING.md,
"Adding a graded function")."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from course_lib import compute_naive_policy_gradient_loss
from tests.helpers import PROPERTY_SETTINGS, corpus_tests, many_draws_test, randn, seeds

SUITE = "compute_naive_policy_gradient_loss"


# ---------------------------------------------------------------- the reference
def test_reference_loss_and_gradient():
    adv = randn(3, 1, seed=10)
    logp = randn(3, 4, seed=11).requires_grad_()
    loss = compute_naive_policy_gradient_loss(adv, logp)
    torch.testing.assert_close(loss, -adv * logp)
    loss.sum().backward()
    torch.testing.assert_close(logp.grad, -adv.expand(3, 4))


def test_reference_never_broadcasts_over_the_batch():
    # (B,) advantages with B == T would silently broadcast along tokens; they are taken per row
    adv = torch.tensor([1.0, 2.0, 3.0])
    logp = torch.ones(3, 3)
    torch.testing.assert_close(compute_naive_policy_gradient_loss(adv, logp), -adv[:, None].expand(3, 3))
    with pytest.raises(ValueError, match=r"\(B, 1\)"):
        compute_naive_policy_gradient_loss(torch.ones(3, 2), logp)


@PROPERTY_SETTINGS
@given(st.integers(1, 6), st.integers(1, 9), seeds, st.booleans(), st.sampled_from([torch.float32, torch.float64]))
def test_reference_matches_float64_for_columns_and_vectors(B, T, seed, column, dtype):
    a = randn(B, 1, seed=seed, dtype=dtype)
    logp = (-randn(B, T, seed=seed + 1, dtype=dtype).abs()).requires_grad_()
    loss = compute_naive_policy_gradient_loss(a if column else a.view(-1), logp)
    assert loss.shape == (B, T) and loss.dtype == dtype
    assert torch.equal(loss, -a * logp.detach())  # one rounding of the exact product: nothing else to differ
    torch.testing.assert_close(loss.double(), -a.double() * logp.detach().double(), atol=1e-6, rtol=1e-6)
    weights = randn(B, T, seed=seed + 2, dtype=dtype)
    (loss * weights).sum().backward()
    torch.testing.assert_close(logp.grad.double(), -(a * weights).double(), atol=1e-6, rtol=1e-6)


# ---------------------------------------------------------------- correct versions and mistakes
CORRECT = {
    "column_helper": """
        import torch
        def _as_column(x, name):
            if x.dim() == 1:
                return x[:, None]
            if x.dim() == 2 and x.shape[1] == 1:
                return x
            raise ValueError(f"{name} must have shape (B, 1) or (B,), got {tuple(x.shape)}")
        def compute_naive_policy_gradient_loss(raw_rewards_or_advantages, policy_log_probs):
            return -_as_column(raw_rewards_or_advantages, "raw_rewards_or_advantages") * policy_log_probs
    """,
    "reshape_minus_one_one": """
        import torch
        def compute_naive_policy_gradient_loss(raw_rewards_or_advantages, policy_log_probs):
            a = raw_rewards_or_advantages.reshape(-1, 1)  # (B,) or (B, 1) -> (B, 1)
            return -a * policy_log_probs
    """,
    "expand_then_negate": """
        import torch
        def compute_naive_policy_gradient_loss(raw_rewards_or_advantages, policy_log_probs):
            a = raw_rewards_or_advantages
            if a.dim() == 1:
                a = a.unsqueeze(-1)
            return torch.neg(a.expand_as(policy_log_probs) * policy_log_probs)
    """,
    "einsum": """
        import torch
        def compute_naive_policy_gradient_loss(raw_rewards_or_advantages, policy_log_probs):
            return torch.einsum("b,bt->bt", -raw_rewards_or_advantages.flatten(), policy_log_probs)
    """,
    "log_probs_times_minus_a": """
        import torch
        def compute_naive_policy_gradient_loss(raw_rewards_or_advantages, policy_log_probs):
            B = policy_log_probs.shape[0]
            return policy_log_probs * (-raw_rewards_or_advantages.view(B, 1))
    """,
}


test_correct_version_earns_full_marks, test_mistake_loses_its_points = corpus_tests(SUITE, CORRECT)
test_each_version_holds_on_many_draws = many_draws_test(SUITE, CORRECT)
