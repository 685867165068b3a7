"""Hidden cases of `grpo_microbatch_train_step(policy_log_probs, response_mask,
gradient_accumulation_steps, loss_type, raw_rewards=None, advantages=None, old_log_probs=None,
cliprange=None) -> (loss, metadata)`.

Every case runs k micro-batches whose log-probs are differentiable functions of ONE shared
parameter, so the gradient must *accumulate* in its `.grad` across the calls (on top of an
existing gradient in some cases). Outputs: the loss returned by each call, the parameter's
gradient after each call and, for "grpo_clip", each call's `metadata["clip_fraction"]` (the
fraction of response tokens whose clipped term is the smaller one) as a float32 number, also in the
float64 case (the reference computes it in float32 there too).

What the cases are built to catch: a token-level mean over the micro-batch instead of the mean
over sequences of per-sequence means (every case has responses of different lengths), no
division by gradient_accumulation_steps, a gradient that overwrites `.grad` instead of adding to
it, a returned loss that is not the one backpropagated, float / long masks, all three loss
types, k from 1 to 4, square micro-batches (B = T) where an advantage broadcast over the wrong
dimension runs silently, float64.
"""

from __future__ import annotations

import torch

GRADED = "grpo_microbatch_train_step"
# the step is graded on the student's own loss and masked_mean: calling the course_lib copies does not count
TRIPWIRE = ["grpo_microbatch_train_step", "compute_policy_gradient_loss", "compute_naive_policy_gradient_loss",
            "compute_grpo_clip_loss", "masked_mean"]


def _both_rewards(won: torch.Tensor) -> torch.Tensor:
    """(B, 1) bool rewards with the short first response rewarded and, when B > 1, the long last one
    not: all-zero rewards give loss and gradient 0 whatever the normalisation, so every draw must
    carry a signal for a token-level mean to show."""
    won = won.clone()
    won[0, 0] = True
    if len(won) > 1:
        won[-1, 0] = False
    return won


def make_inputs(gen: torch.Generator) -> list[tuple[str, dict]]:
    def case(loss_type, B, T, k, dtype=torch.float32, mask_kind="bool", cliprange=0.2, initial_grad=False):
        theta = torch.randn(B, T, generator=gen, dtype=torch.float64).to(dtype)
        micro = []
        for _ in range(k):
            # a response of its own length in every row (at least one token), after a prompt
            starts = torch.randint(0, max(1, T // 3), (B,), generator=gen)
            lengths = torch.randint(1, T + 1, (B,), generator=gen)
            lengths[0], lengths[-1] = 1, T  # one short and one long response: sequence and token means differ
            cols = torch.arange(T)
            mask = (cols >= starts[:, None]) & (cols < (starts + lengths)[:, None])  # never empty: start < T
            advantages = torch.randn(B, 1, generator=gen, dtype=torch.float64)
            # the sampling policy's log-probs: the current ones moved by up to +-0.5 (ratios 0.6..1.65) on
            # the response tokens and not at all elsewhere (ratio 1, never clipped: a clip fraction over every
            # position then counts the response's clipped tokens over more positions, never as many more)
            old_shift = torch.where(mask, (torch.rand(B, T, generator=gen, dtype=torch.float64) * 2 - 1) * 0.5, 0.0)
            # and one token clipped in every micro-batch: the first row's advantage positive and its response
            # token's ratio e^0.4, beyond 1 + eps (without a clipped token, 0 / anything is 0)
            advantages[0, 0] = advantages[0, 0].abs() + 0.1
            old_shift[0, starts[0]] = -0.4
            mask = {"bool": mask, "float": mask.float(), "long": mask.long()}[mask_kind]
            micro.append({
                "scale": (torch.rand(B, T, generator=gen, dtype=torch.float64) * 2 + 0.1).to(dtype),
                "mask": mask,
                "raw_rewards": _both_rewards(torch.rand(B, 1, generator=gen) < 0.5).to(dtype),
                "advantages": advantages.to(dtype),
                "old_shift": old_shift.to(dtype),
            })
        return {
            "theta": theta, "micro_batches": micro, "gradient_accumulation_steps": k,
            "loss_type": loss_type,
            "cliprange": cliprange,
            "initial_grad": torch.randn(B, T, generator=gen, dtype=torch.float64).to(dtype) if initial_grad else None,
        }

    return [
        ("no_baseline_k1_B4_T7", case("no_baseline", 4, 7, 1)),
        ("no_baseline_k3_B3_T6", case("no_baseline", 3, 6, 3)),
        ("reinforce_with_baseline_k1_B5_T8", case("reinforce_with_baseline", 5, 8, 1)),
        ("reinforce_with_baseline_k2_B4_T9", case("reinforce_with_baseline", 4, 9, 2)),
        ("reinforce_with_baseline_k4_B2_T5", case("reinforce_with_baseline", 2, 5, 4)),
        ("grpo_clip_k1_B4_T7", case("grpo_clip", 4, 7, 1)),
        ("grpo_clip_k2_B3_T10", case("grpo_clip", 3, 10, 2)),
        ("grpo_clip_k3_B4_T6_eps0.1", case("grpo_clip", 4, 6, 3, cliprange=0.1)),
        ("existing_grad_reinforce_with_baseline_k2", case("reinforce_with_baseline", 3, 6, 2, initial_grad=True)),
        ("existing_grad_grpo_clip_k3", case("grpo_clip", 3, 6, 3, initial_grad=True)),
        ("float_mask_grpo_clip_k2", case("grpo_clip", 3, 7, 2, mask_kind="float")),
        ("long_mask_reinforce_with_baseline_k2", case("reinforce_with_baseline", 3, 7, 2, mask_kind="long")),
        ("square_B5_T5_reinforce_with_baseline_k2", case("reinforce_with_baseline", 5, 5, 2)),
        ("float64_grpo_clip_k2", case("grpo_clip", 3, 8, 2, dtype=torch.float64)),
        ("B1_T12_grpo_clip_k2", case("grpo_clip", 1, 12, 2)),
        ("B8_T64_reinforce_with_baseline_k4", case("reinforce_with_baseline", 8, 64, 4)),
    ]


def call(fn, inputs: dict) -> dict:
    theta = inputs["theta"].clone().requires_grad_()
    if inputs["initial_grad"] is not None:
        theta.grad = inputs["initial_grad"].clone()
    k, loss_type = inputs["gradient_accumulation_steps"], inputs["loss_type"]
    losses, grads, clip_fractions = [], [], []
    for mb in inputs["micro_batches"]:
        # log-probs <= 0 that depend on the shared parameter: -softplus(scale * theta)
        log_probs = -torch.nn.functional.softplus(mb["scale"] * theta)
        old = (log_probs.detach() + mb["old_shift"]).clamp(max=0.0)
        loss, metadata = fn(log_probs, mb["mask"].clone(), k, loss_type, raw_rewards=mb["raw_rewards"].clone(),
                            advantages=mb["advantages"].clone(), old_log_probs=old,
                            cliprange=inputs["cliprange"])
        losses.append(torch.as_tensor(loss).detach().reshape(()))
        grads.append(theta.grad.detach().clone() if theta.grad is not None else None)
        if loss_type == "grpo_clip":
            # a float32 number in every case, as the reference makes it: a share of token counts, which
            # a student may compute exactly (`.item() / .item()`) or in float32 (`clipped.float()`),
            # and which a wrong count moves by at least 1 / (B * T)
            clip_fractions.append(torch.tensor(float(metadata["clip_fraction"]), dtype=torch.float32))
    out = {"losses": losses, "grads_after_each_call": grads}
    if loss_type == "grpo_clip":
        out["clip_fractions"] = clip_fractions
    return out
