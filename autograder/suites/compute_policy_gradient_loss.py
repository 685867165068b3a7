"""Hidden cases of `compute_policy_gradient_loss(policy_log_probs, loss_type, raw_rewards=None,
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
"""

from __future__ import annotations

import torch

GRADED = "compute_policy_gradient_loss"
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
# the three losses are part of the same exercise: calling the course_lib copies does not count
TRIPWIRE = ["compute_policy_gradient_loss", "compute_naive_policy_gradient_loss", "compute_grpo_clip_loss"]


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


def call(fn, inputs: dict) -> dict:
    log_probs = inputs["policy_log_probs"].clone().requires_grad_()
    kwargs = {k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in inputs["kwargs"].items()}
    loss_type = inputs["loss_type"]
    if inputs["expect_error"]:
        try:
            fn(log_probs, loss_type, **kwargs)
        except Exception as e:  # noqa: BLE001 - which exception is the output
            return {"raises": "ValueError" if isinstance(e, ValueError) else "other"}
        return {"raises": None}
    loss, metadata = fn(log_probs, loss_type, **kwargs)
    (loss * inputs["weights"]).sum().backward()
    out = {"loss": loss, "grad_policy_log_probs": log_probs.grad}
    if loss_type == "grpo_clip":
        out["clipped"] = metadata["clipped"]
    return out
