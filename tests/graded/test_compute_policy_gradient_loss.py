"""compute_policy_gradient_loss (notebook 07): the reference's contract, correct versions that earn
full marks through the real judge, and realistic mistakes that lose them (CONTRIBUTING.md, "Adding
a graded function").

The suite's tripwire forbids calling course_lib's three losses: each version defines the losses it
dispatches to, as a student's notebook 07 does above its dispatcher."""

from __future__ import annotations

import pytest
import torch

from autograder.mistakes.compute_policy_gradient_loss import IF_CHAIN, LOSSES
from course_lib import compute_policy_gradient_loss
from tests.helpers import corpus_tests, many_draws_test, randn

SUITE = "compute_policy_gradient_loss"


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


CORRECT = {
    "if_chain": IF_CHAIN,
    "table_of_required_arguments": LOSSES + """
    REQUIRED = {"no_baseline": ("raw_rewards",), "reinforce_with_baseline": ("advantages",),
                "grpo_clip": ("advantages", "old_log_probs", "cliprange")}
    def compute_policy_gradient_loss(policy_log_probs, loss_type, raw_rewards=None, advantages=None,
                                     old_log_probs=None, cliprange=None):
        if loss_type not in REQUIRED:
            raise ValueError(f"loss_type must be one of {sorted(REQUIRED)}, got {loss_type!r}")
        given = {"raw_rewards": raw_rewards, "advantages": advantages, "old_log_probs": old_log_probs,
                 "cliprange": cliprange}
        missing = [name for name in REQUIRED[loss_type] if given[name] is None]
        if missing:
            raise ValueError(f"{loss_type} needs {missing}")
        if loss_type == "grpo_clip":
            return compute_grpo_clip_loss(advantages, policy_log_probs, old_log_probs, cliprange)
        weights = raw_rewards if loss_type == "no_baseline" else advantages
        return compute_naive_policy_gradient_loss(weights, policy_log_probs), {}
    """,
    "match_statement": LOSSES + """
    def compute_policy_gradient_loss(policy_log_probs, loss_type, raw_rewards=None, advantages=None,
                                     old_log_probs=None, cliprange=None):
        def require(**arguments):
            for name, value in arguments.items():
                if value is None:
                    raise ValueError(f"loss_type={loss_type} requires {name}")
        match loss_type:
            case "no_baseline":
                require(raw_rewards=raw_rewards)
                return compute_naive_policy_gradient_loss(raw_rewards, policy_log_probs), {}
            case "reinforce_with_baseline":
                require(advantages=advantages)
                return compute_naive_policy_gradient_loss(advantages, policy_log_probs), {}
            case "grpo_clip":
                require(advantages=advantages, old_log_probs=old_log_probs, cliprange=cliprange)
                loss, metadata = compute_grpo_clip_loss(advantages, policy_log_probs, old_log_probs, cliprange)
                return loss, metadata
            case _:
                raise ValueError(f"unknown loss_type: {loss_type}")
    """,
    # the losses written inline (no helpers): -A log pi and the clipped surrogate
    "inline_formulas": """
    import torch
    def compute_policy_gradient_loss(policy_log_probs, loss_type, raw_rewards=None, advantages=None,
                                     old_log_probs=None, cliprange=None):
        if loss_type not in ("no_baseline", "reinforce_with_baseline", "grpo_clip"):
            raise ValueError(f"unknown loss_type {loss_type}")
        weight = raw_rewards if loss_type == "no_baseline" else advantages
        if weight is None:
            raise ValueError(f"{loss_type}: {'raw_rewards' if loss_type == 'no_baseline' else 'advantages'} is None")
        weight = weight.view(-1, 1)
        if loss_type != "grpo_clip":
            return -weight * policy_log_probs, {}
        if old_log_probs is None or cliprange is None:
            raise ValueError("grpo_clip: old_log_probs and cliprange are needed")
        ratio = (policy_log_probs - old_log_probs).exp()
        low, high = ratio * weight, ratio.clamp(1 - cliprange, 1 + cliprange) * weight
        return -torch.minimum(low, high), {"clipped": high < low}
    """,
}


test_correct_version_earns_full_marks, test_mistake_loses_its_points = corpus_tests(SUITE, CORRECT)
test_each_version_holds_on_many_draws = many_draws_test(SUITE, CORRECT)
