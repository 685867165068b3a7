"""compute_policy_gradient_loss (notebook 07): the reference's contract. Its correct versions and known
mistakes are in grader.py (tests/test_graded.py runs them through the judge).
"""

from __future__ import annotations

import pytest
import torch

from course_lib import compute_policy_gradient_loss
from tests.helpers import randn


# ---------------------------------------------------------------- the reference
def test_reference_dispatches_to_the_three_losses():
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


def test_reference_ignores_the_arguments_a_loss_does_not_need():
    logp = randn(2, 3, seed=14)
    r, a = torch.tensor([[1.0], [0.0]]), torch.tensor([[0.5], [-0.5]])
    everything = dict(raw_rewards=r, advantages=a, old_log_probs=logp + 0.1, cliprange=0.2)
    assert torch.equal(compute_policy_gradient_loss(logp, "no_baseline", **everything)[0], -r * logp)
    assert torch.equal(compute_policy_gradient_loss(logp, "reinforce_with_baseline", **everything)[0], -a * logp)
    assert compute_policy_gradient_loss(logp, "no_baseline", **everything)[1] == {}


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"loss_type": "ppo"}, "unknown loss_type 'ppo'"),
        ({"loss_type": "no_baseline"}, "needs raw_rewards"),
        ({"loss_type": "reinforce_with_baseline", "raw_rewards": torch.ones(2, 1)}, "needs advantages"),
        ({"loss_type": "grpo_clip", "advantages": torch.ones(2, 1)}, "needs old_log_probs, cliprange"),
    ],
)
def test_reference_clear_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        compute_policy_gradient_loss(torch.zeros(2, 3), **kwargs)
