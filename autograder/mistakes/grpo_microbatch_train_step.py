"""The known mistakes of `grpo_microbatch_train_step` (notebook 07): the catalogue `autograder.mistakes` describes."""

from __future__ import annotations

from autograder.mistakes import Mistake, edited


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
# the correct version 'masked_mean_then_mean' (tests/graded/test_grpo_microbatch_train_step.py), which the edits start from
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
