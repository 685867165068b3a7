"""compute_policy_gradient_loss (notebook 07): the reference's contract, correct versions that earn
full marks through the real judge, and realistic mistakes that lose them (CONTRIBUTING.md, "Adding
a graded function").

The suite's tripwire forbids calling course_lib's three losses: each version defines the losses it
dispatches to, as a student's notebook 07 does above its dispatcher."""

from __future__ import annotations

import pytest
import torch

from course_lib import compute_policy_gradient_loss
from tests.helpers import corpus_tests, many_draws_test, edited, randn

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


# ---------------------------------------------------------------- correct versions and mistakes
# the two losses of a notebook-07 student, pasted above each dispatcher (the same in every version:
# it is the dispatcher that is graded here)
LOSSES = """
    import torch
    def compute_naive_policy_gradient_loss(raw_rewards_or_advantages, policy_log_probs):
        return -raw_rewards_or_advantages.reshape(-1, 1) * policy_log_probs
    def compute_grpo_clip_loss(advantages, policy_log_probs, old_log_probs, cliprange):
        adv = advantages.reshape(-1, 1)
        ratio = torch.exp(policy_log_probs - old_log_probs)
        unclipped = ratio * adv
        clipped = torch.clamp(ratio, 1.0 - cliprange, 1.0 + cliprange) * adv
        return -torch.minimum(unclipped, clipped), {"clipped": clipped < unclipped}
"""

CORRECT = {
    "if_chain": LOSSES + """
    def compute_policy_gradient_loss(policy_log_probs, loss_type, raw_rewards=None, advantages=None,
                                     old_log_probs=None, cliprange=None):
        if loss_type == "no_baseline":
            if raw_rewards is None:
                raise ValueError("no_baseline needs raw_rewards")
            return compute_naive_policy_gradient_loss(raw_rewards, policy_log_probs), {}
        if loss_type == "reinforce_with_baseline":
            if advantages is None:
                raise ValueError("reinforce_with_baseline needs advantages")
            return compute_naive_policy_gradient_loss(advantages, policy_log_probs), {}
        if loss_type == "grpo_clip":
            if advantages is None or old_log_probs is None or cliprange is None:
                raise ValueError("grpo_clip needs advantages, old_log_probs and cliprange")
            return compute_grpo_clip_loss(advantages, policy_log_probs, old_log_probs, cliprange)
        raise ValueError(f"unknown loss_type {loss_type!r}")
    """,
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

# the dispatcher of "if_chain" with one realistic edit each (written out where the edit rewrites most of it)
IF_CHAIN = CORRECT["if_chain"]
# its checks of the arguments each loss needs, and the return of its grpo_clip branch
CHECK_RAW_REWARDS = ('            if raw_rewards is None:\n'
                     '                raise ValueError("no_baseline needs raw_rewards")\n')
CHECK_ADVANTAGES = ('            if advantages is None:\n'
                    '                raise ValueError("reinforce_with_baseline needs advantages")\n')
CHECK_GRPO_CLIP = ('            if advantages is None or old_log_probs is None or cliprange is None:\n'
                   '                raise ValueError("grpo_clip needs advantages, old_log_probs and cliprange")\n')
GRPO_CLIP_RETURN = "return compute_grpo_clip_loss(advantages, policy_log_probs, old_log_probs, cliprange)\n"
MISTAKES = {
    # an else that catches everything: "GRPO_clip" or "reinforce" runs a loss instead of an error
    "unknown_loss_type_runs_grpo_clip": (edited(IF_CHAIN, (
        '        if loss_type == "grpo_clip":\n' + CHECK_GRPO_CLIP + "            " + GRPO_CLIP_RETURN
        + '        raise ValueError(f"unknown loss_type {loss_type!r}")\n',
        "        if advantages is None or old_log_probs is None or cliprange is None:\n"
        '            raise ValueError("grpo_clip needs advantages, old_log_probs and cliprange")\n'
        "        " + GRPO_CLIP_RETURN)),
        ["error_unknown_loss_type_GRPO_clip", "error_unknown_loss_type_reinforce"]),
    # a dict lookup: an unknown name raises KeyError, not the ValueError of the contract
    "unknown_loss_type_raises_KeyError": (LOSSES + """
    def compute_policy_gradient_loss(policy_log_probs, loss_type, raw_rewards=None, advantages=None,
                                     old_log_probs=None, cliprange=None):
        required = {"no_baseline": [raw_rewards], "reinforce_with_baseline": [advantages],
                    "grpo_clip": [advantages, old_log_probs, cliprange]}[loss_type]
        if any(x is None for x in required):
            raise ValueError(f"{loss_type} is missing an argument")
        if loss_type == "grpo_clip":
            return compute_grpo_clip_loss(advantages, policy_log_probs, old_log_probs, cliprange)
        weights = raw_rewards if loss_type == "no_baseline" else advantages
        return compute_naive_policy_gradient_loss(weights, policy_log_probs), {}
    """, ["error_unknown_loss_type_reinforce", "error_unknown_loss_type_GRPO_clip"]),
    # no check: a missing argument surfaces as a TypeError from None * tensor, or none at all
    "missing_argument_not_checked": (edited(IF_CHAIN, (CHECK_RAW_REWARDS, ""), (CHECK_ADVANTAGES, ""),
                                            (CHECK_GRPO_CLIP, "")),
                                     ["error_no_baseline_without_raw_rewards", "error_grpo_clip_without_cliprange"]),
    # REINFORCE with a baseline on the raw rewards: the baseline is never subtracted
    "baseline_loss_reads_raw_rewards": (edited(IF_CHAIN, (
        "return compute_naive_policy_gradient_loss(advantages, policy_log_probs)",
        "return compute_naive_policy_gradient_loss(raw_rewards, policy_log_probs)")),
        ["reinforce_with_baseline_all_arguments_given"]),
    # no_baseline on the advantages: it is the baseline loss under another name
    "no_baseline_reads_advantages": (edited(IF_CHAIN, (
        '        if loss_type == "no_baseline":\n' + CHECK_RAW_REWARDS
        + "            return compute_naive_policy_gradient_loss(raw_rewards, policy_log_probs), {}\n"
        + '        if loss_type == "reinforce_with_baseline":\n',
        '        if loss_type in ("no_baseline", "reinforce_with_baseline"):\n'), (
        'raise ValueError("reinforce_with_baseline needs advantages")',
        'raise ValueError(f"{loss_type} needs advantages")')),
        ["no_baseline_all_arguments_given", "no_baseline_only_raw_rewards"]),
    # assert is not a ValueError (and vanishes under python -O)
    "assert_instead_of_ValueError": (LOSSES + """
    def compute_policy_gradient_loss(policy_log_probs, loss_type, raw_rewards=None, advantages=None,
                                     old_log_probs=None, cliprange=None):
        assert loss_type in ("no_baseline", "reinforce_with_baseline", "grpo_clip"), f"unknown loss_type {loss_type}"
        if loss_type == "no_baseline":
            assert raw_rewards is not None, "no_baseline needs raw_rewards"
            return compute_naive_policy_gradient_loss(raw_rewards, policy_log_probs), {}
        if loss_type == "reinforce_with_baseline":
            assert advantages is not None, "reinforce_with_baseline needs advantages"
            return compute_naive_policy_gradient_loss(advantages, policy_log_probs), {}
        assert None not in (advantages, old_log_probs, cliprange), "grpo_clip needs advantages, old_log_probs, cliprange"
        return compute_grpo_clip_loss(advantages, policy_log_probs, old_log_probs, cliprange)
    """, ["error_unknown_loss_type_GRPO_clip", "error_no_baseline_without_raw_rewards"]),
    # every argument demanded for every loss: no_baseline without advantages must work
    "every_argument_required": (edited(IF_CHAIN, (CHECK_RAW_REWARDS, ""), (CHECK_ADVANTAGES, ""),
                                       (CHECK_GRPO_CLIP, ""), (
        '        if loss_type == "no_baseline":\n',
        "        if any(x is None for x in (raw_rewards, advantages, old_log_probs, cliprange)):\n"
        '            raise ValueError("raw_rewards, advantages, old_log_probs and cliprange are all needed")\n'
        '        if loss_type == "no_baseline":\n')),
        ["no_baseline_only_raw_rewards", "reinforce_with_baseline_only_advantages",
         "grpo_clip_without_raw_rewards"]),
    # grpo_clip dispatched to the unclipped REINFORCE loss on the advantages
    "grpo_clip_without_the_clip": (LOSSES + """
    def compute_policy_gradient_loss(policy_log_probs, loss_type, raw_rewards=None, advantages=None,
                                     old_log_probs=None, cliprange=None):
        if loss_type == "no_baseline":
            if raw_rewards is None:
                raise ValueError("no_baseline needs raw_rewards")
            return compute_naive_policy_gradient_loss(raw_rewards, policy_log_probs), {}
        if loss_type in ("reinforce_with_baseline", "grpo_clip"):
            if advantages is None or (loss_type == "grpo_clip" and (old_log_probs is None or cliprange is None)):
                raise ValueError(f"{loss_type} is missing an argument")
            loss = compute_naive_policy_gradient_loss(advantages, policy_log_probs)
            return loss, ({"clipped": torch.zeros_like(loss, dtype=torch.bool)} if loss_type == "grpo_clip" else {})
        raise ValueError(f"unknown loss_type {loss_type!r}")
    """, ["grpo_clip_all_arguments_given", "grpo_clip_float64_square_B5_T5"]),
}

test_correct_version_earns_full_marks, test_mistake_loses_its_points = corpus_tests(SUITE, CORRECT, MISTAKES)
test_each_version_holds_on_many_draws = many_draws_test(SUITE, CORRECT, MISTAKES)
