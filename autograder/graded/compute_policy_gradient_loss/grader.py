"""The grader's side of `compute_policy_gradient_loss` (notebook 07): how its hidden cases are drawn,
the correct versions that must earn full marks and the known mistakes that must lose them, each with
the sentence a student reads (`autograder.mistakes`). Never in a student kit or the grading sandbox,
which hold the folder's __init__.py only.

Hidden cases of `compute_policy_gradient_loss(policy_log_probs, loss_type, raw_rewards=None,
advantages=None, old_log_probs=None, cliprange=None) -> (loss, metadata)`.

Outputs of a normal case: the (B, T) loss, the gradient of a weighted sum of it with respect to
the policy log-probs and, for "grpo_clip", `metadata["clipped"]`. Arguments are passed by
keyword, and only those a case names (the others keep their default None).

Error cases: an unknown loss_type, or a loss_type without an argument it needs, must raise
ValueError (or a subclass); the output of such a case is {"raises": "ValueError"}, {"raises":
"other"} (another exception) or {"raises": None}.

What the cases are built to catch: "reinforce_with_baseline" reading raw_rewards (every case
passes raw_rewards and advantages that differ), "no_baseline" reading advantages, "grpo_clip"
without the clip, a loss_type that needs nothing it is not given (no_baseline without
advantages, reinforce_with_baseline without raw_rewards or old_log_probs must work), unknown
names ("GRPO_clip", "reinforce") and missing arguments that do not raise, or raise something
else than ValueError (a TypeError from None * tensor, a KeyError).

The suite's tripwire forbids calling course_lib's three losses: each version defines the losses it
dispatches to, as a student's notebook 07 does above its dispatcher.
"""

from __future__ import annotations

import torch

from autograder.mistakes import edited, Mistake


# ---------------------------------------------------------------- the hidden cases
# each error case and the phrase of the reference's `Raises:` section that states it (tests/test_contracts.py)
RAISES = {
    "error_unknown_loss_type_GRPO_clip": "any other loss_type",
    "error_unknown_loss_type_reinforce": "any other loss_type",
    "error_no_baseline_without_raw_rewards": "an argument the loss needs is None",
    "error_reinforce_with_baseline_without_advantages": "an argument the loss needs is None",
    "error_grpo_clip_without_old_log_probs": "an argument the loss needs is None",
    "error_grpo_clip_without_cliprange": "an argument the loss needs is None",
    "error_grpo_clip_without_advantages": "an argument the loss needs is None",
}


def make_inputs(gen: torch.Generator) -> list[tuple[str, dict]]:
    def tensors(B, T, dtype=torch.float32):
        old = -torch.rand(B, T, generator=gen, dtype=torch.float64) * 3
        new = old + (torch.rand(B, T, generator=gen, dtype=torch.float64) * 2 - 1) * 0.5
        return {
            "policy_log_probs": new.to(dtype),
            "raw_rewards": (torch.rand(B, 1, generator=gen) < 0.5).to(dtype),
            "advantages": torch.randn(B, 1, generator=gen, dtype=torch.float64).to(dtype),
            "old_log_probs": old.to(dtype),
            "cliprange": 0.2,
            "weights": torch.randn(B, T, generator=gen, dtype=torch.float64).to(dtype),
        }

    ALL = ("raw_rewards", "advantages", "old_log_probs", "cliprange")

    def case(loss_type, B=4, T=7, given=ALL, dtype=torch.float32, expect_error=False):
        t = tensors(B, T, dtype)
        return {"loss_type": loss_type, "kwargs": {k: t[k] for k in given},
                "policy_log_probs": t["policy_log_probs"], "weights": t["weights"], "expect_error": expect_error}

    return [
        ("no_baseline_all_arguments_given", case("no_baseline")),
        ("no_baseline_only_raw_rewards", case("no_baseline", given=("raw_rewards",))),
        ("reinforce_with_baseline_all_arguments_given", case("reinforce_with_baseline", B=5, T=6)),
        ("reinforce_with_baseline_only_advantages", case("reinforce_with_baseline", given=("advantages",))),
        ("grpo_clip_all_arguments_given", case("grpo_clip", B=4, T=9)),
        ("grpo_clip_without_raw_rewards", case("grpo_clip", given=("advantages", "old_log_probs", "cliprange"))),
        ("grpo_clip_float64_square_B5_T5", case("grpo_clip", B=5, T=5, dtype=torch.float64)),
        ("reinforce_with_baseline_square_B4_T4", case("reinforce_with_baseline", B=4, T=4)),
        ("error_unknown_loss_type_GRPO_clip", case("GRPO_clip", expect_error=True)),
        ("error_unknown_loss_type_reinforce", case("reinforce", expect_error=True)),
        ("error_no_baseline_without_raw_rewards", case("no_baseline", given=("advantages", "old_log_probs", "cliprange"),
                                                       expect_error=True)),
        ("error_reinforce_with_baseline_without_advantages",
         case("reinforce_with_baseline", given=("raw_rewards", "old_log_probs", "cliprange"), expect_error=True)),
        ("error_grpo_clip_without_old_log_probs", case("grpo_clip", given=("raw_rewards", "advantages", "cliprange"),
                                                       expect_error=True)),
        ("error_grpo_clip_without_cliprange", case("grpo_clip", given=("raw_rewards", "advantages", "old_log_probs"),
                                                   expect_error=True)),
        ("error_grpo_clip_without_advantages", case("grpo_clip", given=("raw_rewards", "old_log_probs", "cliprange"),
                                                    expect_error=True)),
    ]


# ---------------------------------------------------------------- the correct versions
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

# the dispatcher of "if_chain" with one realistic edit each (written out where the edit rewrites most of it)
# the correct version 'if_chain' (autograder/graded/compute_policy_gradient_loss/test_compute_policy_gradient_loss.py), which the edits start from
IF_CHAIN = LOSSES + """
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
    """

# its checks of the arguments each loss needs, and the return of its grpo_clip branch
CHECK_RAW_REWARDS = ('            if raw_rewards is None:\n'
                     '                raise ValueError("no_baseline needs raw_rewards")\n')

CHECK_ADVANTAGES = ('            if advantages is None:\n'
                    '                raise ValueError("reinforce_with_baseline needs advantages")\n')

CHECK_GRPO_CLIP = ('            if advantages is None or old_log_probs is None or cliprange is None:\n'
                   '                raise ValueError("grpo_clip needs advantages, old_log_probs and cliprange")\n')

GRPO_CLIP_RETURN = "return compute_grpo_clip_loss(advantages, policy_log_probs, old_log_probs, cliprange)\n"


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


# ---------------------------------------------------------------- the known mistakes
MISTAKES = {
    # an else that catches everything: "GRPO_clip" or "reinforce" runs a loss instead of an error
    "unknown_loss_type_runs_grpo_clip": Mistake(
        "runs the clip loss for any unknown loss_type (an else that catches everything) instead of raising ValueError",
        edited(IF_CHAIN, (
            '        if loss_type == "grpo_clip":\n' + CHECK_GRPO_CLIP + "            " + GRPO_CLIP_RETURN
            + '        raise ValueError(f"unknown loss_type {loss_type!r}")\n',
            "        if advantages is None or old_log_probs is None or cliprange is None:\n"
            '            raise ValueError("grpo_clip needs advantages, old_log_probs and cliprange")\n'
            "        " + GRPO_CLIP_RETURN)),
        ["error_unknown_loss_type_GRPO_clip", "error_unknown_loss_type_reinforce"]),
    # a dict lookup: an unknown name raises KeyError, not the ValueError of the contract
    "unknown_loss_type_raises_KeyError": Mistake(
        "looks loss_type up in a dict, so an unknown name raises KeyError instead of ValueError",
        LOSSES + """
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
    """,
        ["error_unknown_loss_type_reinforce", "error_unknown_loss_type_GRPO_clip"]),
    # no check: a missing argument surfaces as a TypeError from None * tensor, or none at all
    "missing_argument_not_checked": Mistake(
        "never checks the arguments a loss needs, so a missing one raises TypeError (or nothing) instead of ValueError",
        edited(IF_CHAIN, (CHECK_RAW_REWARDS, ""), (CHECK_ADVANTAGES, ""),
                                                (CHECK_GRPO_CLIP, "")),
        ["error_no_baseline_without_raw_rewards", "error_grpo_clip_without_cliprange"]),
    # REINFORCE with a baseline on the raw rewards: the baseline is never subtracted
    "baseline_loss_reads_raw_rewards": Mistake(
        "computes reinforce_with_baseline on the raw rewards instead of the advantages",
        edited(IF_CHAIN, (
            "return compute_naive_policy_gradient_loss(advantages, policy_log_probs)",
            "return compute_naive_policy_gradient_loss(raw_rewards, policy_log_probs)")),
        ["reinforce_with_baseline_all_arguments_given"]),
    # no_baseline on the advantages: it is the baseline loss under another name
    "no_baseline_reads_advantages": Mistake(
        "computes no_baseline on the advantages instead of the raw rewards",
        edited(IF_CHAIN, (
            '        if loss_type == "no_baseline":\n' + CHECK_RAW_REWARDS
            + "            return compute_naive_policy_gradient_loss(raw_rewards, policy_log_probs), {}\n"
            + '        if loss_type == "reinforce_with_baseline":\n',
            '        if loss_type in ("no_baseline", "reinforce_with_baseline"):\n'), (
            'raise ValueError("reinforce_with_baseline needs advantages")',
            'raise ValueError(f"{loss_type} needs advantages")')),
        ["no_baseline_all_arguments_given", "no_baseline_only_raw_rewards"]),
    # assert is not a ValueError (and vanishes under python -O)
    "assert_instead_of_ValueError": Mistake(
        "checks with assert, which raises AssertionError (or nothing under python -O), not ValueError",
        LOSSES + """
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
    """,
        ["error_unknown_loss_type_GRPO_clip", "error_no_baseline_without_raw_rewards"]),
    # every argument demanded for every loss: no_baseline without advantages must work
    "every_argument_required": Mistake(
        "demands every argument for every loss type: no_baseline without advantages must work",
        edited(IF_CHAIN, (CHECK_RAW_REWARDS, ""), (CHECK_ADVANTAGES, ""),
                                           (CHECK_GRPO_CLIP, ""), (
            '        if loss_type == "no_baseline":\n',
            "        if any(x is None for x in (raw_rewards, advantages, old_log_probs, cliprange)):\n"
            '            raise ValueError("raw_rewards, advantages, old_log_probs and cliprange are all needed")\n'
            '        if loss_type == "no_baseline":\n')),
        ["no_baseline_only_raw_rewards", "reinforce_with_baseline_only_advantages",
         "grpo_clip_without_raw_rewards"]),
    # grpo_clip dispatched to the unclipped REINFORCE loss on the advantages
    "grpo_clip_without_the_clip": Mistake(
        "runs the unclipped REINFORCE loss on the advantages for grpo_clip",
        LOSSES + """
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
    """,
        ["grpo_clip_all_arguments_given", "grpo_clip_float64_square_B5_T5"]),
    # notebook 07's visible check: "return the clip loss's metadata for 'grpo_clip'"
    "clip_metadata_dropped": Mistake(
        "returns an empty metadata dict for grpo_clip instead of the clip loss's metadata",
        edited(IF_CHAIN, (GRPO_CLIP_RETURN,
                          "return compute_grpo_clip_loss(advantages, policy_log_probs, old_log_probs, cliprange)[0], {}\n")),
        ["grpo_clip_all_arguments_given", "grpo_clip_without_raw_rewards"]),
}
