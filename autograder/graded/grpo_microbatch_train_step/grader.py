"""The grader's side of `grpo_microbatch_train_step` (notebook 07): how its hidden cases are drawn, the
correct versions that must earn full marks and the known mistakes that must lose them, each with the
sentence a student reads (`autograder.mistakes`). Never in a student kit or the grading sandbox,
which hold the folder's __init__.py only.

Hidden cases of `grpo_microbatch_train_step(policy_log_probs, response_mask,
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

The suite's tripwire forbids calling course_lib's losses and masked_mean: the step is graded on a
student's own, so each version carries the notebook-07 functions it uses.
"""

from __future__ import annotations

import torch

from autograder.mistakes import edited, Mistake


# ---------------------------------------------------------------- the hidden cases
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


# ---------------------------------------------------------------- the correct versions
# a notebook-07 student's own loss functions and masked_mean, pasted above each step
HELPERS = """
    import torch
    def compute_naive_policy_gradient_loss(raw_rewards_or_advantages, policy_log_probs):
        return -raw_rewards_or_advantages.reshape(-1, 1) * policy_log_probs
    def compute_grpo_clip_loss(advantages, policy_log_probs, old_log_probs, cliprange):
        adv = advantages.reshape(-1, 1)
        ratio = torch.exp(policy_log_probs - old_log_probs)
        unclipped = ratio * adv
        clipped = torch.clamp(ratio, 1.0 - cliprange, 1.0 + cliprange) * adv
        return -torch.minimum(unclipped, clipped), {"clipped": clipped < unclipped}
    def compute_policy_gradient_loss(policy_log_probs, loss_type, raw_rewards=None, advantages=None,
                                     old_log_probs=None, cliprange=None):
        if loss_type == "no_baseline":
            return compute_naive_policy_gradient_loss(raw_rewards, policy_log_probs), {}
        if loss_type == "reinforce_with_baseline":
            return compute_naive_policy_gradient_loss(advantages, policy_log_probs), {}
        if loss_type == "grpo_clip":
            return compute_grpo_clip_loss(advantages, policy_log_probs, old_log_probs, cliprange)
        raise ValueError(f"unknown loss_type {loss_type!r}")
    def masked_mean(tensor, mask, dim=None):
        kept = torch.where(mask.bool(), tensor, 0.0)
        count = mask.to(kept.dtype)
        return kept.sum() / count.sum() if dim is None else kept.sum(dim=dim) / count.sum(dim=dim)
"""

# the step of "masked_mean_then_mean" with one realistic edit each
# the correct version 'masked_mean_then_mean' (autograder/graded/grpo_microbatch_train_step/test_grpo_microbatch_train_step.py), which the edits start from
STEP = HELPERS + """
    def grpo_microbatch_train_step(policy_log_probs, response_mask, gradient_accumulation_steps, loss_type,
                                   raw_rewards=None, advantages=None, old_log_probs=None, cliprange=None):
        per_token, metadata = compute_policy_gradient_loss(policy_log_probs, loss_type, raw_rewards, advantages,
                                                           old_log_probs, cliprange)
        loss = masked_mean(per_token, response_mask, dim=-1).mean() / gradient_accumulation_steps
        loss.backward()
        metadata = dict(metadata)
        if "clipped" in metadata:
            metadata["clip_fraction"] = masked_mean(metadata["clipped"].float(), response_mask)
        return loss.detach(), metadata
    """

LOSS = "loss = masked_mean(per_token, response_mask, dim=-1).mean() / gradient_accumulation_steps"


CORRECT = {
    "masked_mean_then_mean": STEP,
    # one sequence at a time: the mean of its response tokens, then the mean over sequences
    "loop_over_sequences": HELPERS + """
    def grpo_microbatch_train_step(policy_log_probs, response_mask, gradient_accumulation_steps, loss_type,
                                   raw_rewards=None, advantages=None, old_log_probs=None, cliprange=None):
        per_token, metadata = compute_policy_gradient_loss(
            policy_log_probs, loss_type, raw_rewards=raw_rewards, advantages=advantages,
            old_log_probs=old_log_probs, cliprange=cliprange)
        keep = response_mask.bool()
        per_sequence = torch.stack([row[m].mean() for row, m in zip(per_token, keep)])
        loss = per_sequence.mean() / gradient_accumulation_steps
        loss.backward()
        out = dict(metadata)
        if loss_type == "grpo_clip":
            out["clip_fraction"] = metadata["clipped"][keep].float().mean()
        return loss.detach(), out
    """,
    # every token's weight written out: 1 / (its sequence's length * B * k)
    "token_weights": HELPERS + """
    def grpo_microbatch_train_step(policy_log_probs, response_mask, gradient_accumulation_steps, loss_type,
                                   raw_rewards=None, advantages=None, old_log_probs=None, cliprange=None):
        per_token, metadata = compute_policy_gradient_loss(policy_log_probs, loss_type, raw_rewards, advantages,
                                                           old_log_probs, cliprange)
        m = response_mask.to(per_token.dtype)
        B = per_token.shape[0]
        weights = m / m.sum(dim=1, keepdim=True) / (B * gradient_accumulation_steps)
        loss = torch.where(m > 0, per_token * weights, 0.0).sum()
        loss.backward()
        if "clipped" in metadata:
            metadata["clip_fraction"] = (metadata["clipped"] & response_mask.bool()).sum() / response_mask.bool().sum()
        return loss.detach(), metadata
    """,
    # the loss in float64, backpropagated through the cast, returned in the log-probs' dtype
    "float64_loss": HELPERS + """
    def grpo_microbatch_train_step(policy_log_probs, response_mask, gradient_accumulation_steps, loss_type,
                                   raw_rewards=None, advantages=None, old_log_probs=None, cliprange=None):
        per_token, metadata = compute_policy_gradient_loss(policy_log_probs, loss_type, raw_rewards, advantages,
                                                           old_log_probs, cliprange)
        loss = masked_mean(per_token.double(), response_mask, dim=-1).mean() / gradient_accumulation_steps
        loss.backward()
        if loss_type == "grpo_clip":
            metadata["clip_fraction"] = masked_mean(metadata["clipped"].double(), response_mask).item()
        return loss.detach().to(policy_log_probs.dtype), metadata
    """,
    # the mean over sequences as a sum / B, the scale folded into one divisor
    "sum_over_B_times_k": HELPERS + """
    def grpo_microbatch_train_step(policy_log_probs, response_mask, gradient_accumulation_steps, loss_type,
                                   raw_rewards=None, advantages=None, old_log_probs=None, cliprange=None):
        per_token, metadata = compute_policy_gradient_loss(policy_log_probs, loss_type, raw_rewards, advantages,
                                                           old_log_probs, cliprange)
        per_sequence = masked_mean(per_token, response_mask, dim=1)
        loss = per_sequence.sum() / (per_sequence.numel() * gradient_accumulation_steps)
        loss.backward()
        if "clipped" in metadata:
            metadata = {**metadata, "clip_fraction": masked_mean(metadata["clipped"], response_mask.bool())}
        return loss.detach(), metadata
    """,
}

# the fresh draws of the cases the many-draws check holds every version to (tests/test_graded.py; 40 by default)
DRAWS = 12


# ---------------------------------------------------------------- the known mistakes
MISTAKES = {
    # one mean over all tokens of the micro-batch: long responses weigh more (every case has lengths 1 and T)
    "step_token_level_mean": Mistake(
        "takes one mean over every response token of the micro-batch instead of each sequence's mean, then the batch mean",
        edited(STEP, (
            LOSS, "loss = masked_mean(per_token, response_mask) / gradient_accumulation_steps")),
        ["reinforce_with_baseline_k1_B5_T8", "no_baseline_k1_B4_T7"]),
    # k micro-batches add up to k times the batch's gradient
    "step_no_division_by_accumulation_steps": Mistake(
        "never divides the loss by gradient_accumulation_steps, so k micro-batches give k times the gradient",
        edited(STEP, (
            LOSS, "loss = masked_mean(per_token, response_mask, dim=-1).mean()")),
        ["reinforce_with_baseline_k2_B4_T9", "grpo_clip_k3_B4_T6_eps0.1"]),
    # a sum over sequences: the gradient scales with the micro-batch size
    "step_sum_over_the_batch": Mistake(
        "sums over the sequences instead of averaging them",
        edited(STEP, (
            LOSS, "loss = masked_mean(per_token, response_mask, dim=-1).sum() / gradient_accumulation_steps")),
        ["reinforce_with_baseline_k1_B5_T8"]),
    # the loss is returned and never backpropagated
    "step_without_backward": Mistake(
        "returns the loss without calling backward on it",
        edited(STEP, ("        loss.backward()\n", "")),
        ["no_baseline_k1_B4_T7", "grpo_clip_k1_B4_T7"]),
    # "fresh" gradients each call: every leaf of the graph (the shared parameter) zeroed before backward,
    # so micro-batches no longer add up (nor does an existing gradient survive)
    "step_gradient_replaces_grad": Mistake(
        "clears the parameters' gradients before backward, so micro-batches do not add up",
        edited(STEP, (
            "        loss.backward()\n",
            "        seen, stack = set(), [loss.grad_fn]\n"
            "        while stack:\n"
            "            fn = stack.pop()\n"
            "            if fn is None or fn in seen:\n"
            "                continue\n"
            "            seen.add(fn)\n"
            '            if hasattr(fn, "variable"):\n'
            "                fn.variable.grad = None\n"
            "            stack += [f for f, _ in fn.next_functions]\n"
            "        loss.backward()\n")),
        ["existing_grad_reinforce_with_baseline_k2", "reinforce_with_baseline_k2_B4_T9"]),
    # the loss before the division by k: not the one backpropagated
    "step_returns_the_unscaled_loss": Mistake(
        "returns the loss before the division by gradient_accumulation_steps, not the one backpropagated",
        edited(STEP, (
            "return loss.detach(), metadata", "return loss.detach() * gradient_accumulation_steps, metadata")),
        ["reinforce_with_baseline_k2_B4_T9"]),
    # divided by k after the backward: the returned loss is scaled, the gradient is not
    "step_divided_after_backward": Mistake(
        "divides by gradient_accumulation_steps after backward: the returned loss is scaled, the gradient is not",
        edited(STEP, (
            LOSS, "loss = masked_mean(per_token, response_mask, dim=-1).mean()"), (
            "return loss.detach(), metadata", "return loss.detach() / gradient_accumulation_steps, metadata")),
        ["reinforce_with_baseline_k2_B4_T9", "grpo_clip_k2_B3_T10"]),
    # the clip fraction over every position, prompt and padding included
    "step_clip_fraction_over_all_tokens": Mistake(
        "computes the clip fraction over every position, prompt and padding included, instead of the response tokens",
        edited(STEP, (
            'masked_mean(metadata["clipped"].float(), response_mask)', 'metadata["clipped"].float().mean()')),
        ["grpo_clip_k2_B3_T10", "grpo_clip_k3_B4_T6_eps0.1"]),
}
