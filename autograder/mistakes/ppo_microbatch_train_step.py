"""The known mistakes of `ppo_microbatch_train_step` (notebook 11): the catalogue `autograder.mistakes` describes."""

from __future__ import annotations

from autograder.mistakes import Mistake, edited


# a student's own notebook-07 clip loss and masked_mean, and notebook-11 value loss, pasted above the step
HELPERS = """
    import torch
    def masked_mean(tensor, mask, dim=None):
        kept = torch.where(mask.bool(), tensor, 0.0)
        count = mask.to(kept.dtype)
        return kept.sum() / count.sum() if dim is None else kept.sum(dim=dim) / count.sum(dim=dim)
    def compute_grpo_clip_loss(advantages, policy_log_probs, old_log_probs, cliprange):
        adv = advantages.reshape(-1, 1)
        ratio = torch.exp(policy_log_probs - old_log_probs)
        unclipped = ratio * adv
        clipped = torch.clamp(ratio, 1.0 - cliprange, 1.0 + cliprange) * adv
        return -torch.minimum(unclipped, clipped), {"clipped": clipped < unclipped}
    def value_loss(values, old_values, returns, response_mask, cliprange_value):
        clipped = old_values + torch.clamp(values - old_values, -cliprange_value, cliprange_value)
        per_token = torch.maximum((values - returns) ** 2, (clipped - returns) ** 2)
        return 0.5 * masked_mean(per_token, response_mask)
"""

# the step of "helpers_one_token_per_row" with one realistic edit each
# the correct version 'helpers_one_token_per_row' (tests/graded/test_ppo_microbatch_train_step.py), which the edits start from
STEP = HELPERS + """
    def ppo_microbatch_train_step(policy_log_probs, values, response_mask, gradient_accumulation_steps, *, advantages,
                                  old_log_probs, old_values, returns, cliprange, cliprange_value, vf_coef):
        per_token, meta = compute_grpo_clip_loss(advantages.reshape(-1, 1), policy_log_probs.reshape(-1, 1),
                                                 old_log_probs.reshape(-1, 1), cliprange)
        per_token = per_token.reshape(response_mask.shape)
        policy_loss = masked_mean(per_token, response_mask, dim=-1).mean()
        v_loss = value_loss(values, old_values, returns, response_mask, cliprange_value)
        loss = (policy_loss + vf_coef * v_loss) / gradient_accumulation_steps
        loss.backward()
        v_clip = old_values + torch.clamp(values - old_values, -cliprange_value, cliprange_value)
        v_clipped = (v_clip - returns) ** 2 > (values - returns) ** 2
        return loss.detach(), {
            "policy_loss": policy_loss.detach(), "value_loss": v_loss.detach(),
            "clip_fraction": masked_mean(meta["clipped"].reshape(response_mask.shape).float(), response_mask),
            "value_clip_fraction": masked_mean(v_clipped.float(), response_mask),
        }
    """

POLICY = "policy_loss = masked_mean(per_token, response_mask, dim=-1).mean()"

LOSS = "loss = (policy_loss + vf_coef * v_loss) / gradient_accumulation_steps"

VLOSS = "v_loss = value_loss(values, old_values, returns, response_mask, cliprange_value)"

RETURN = "return loss.detach(), {"

CLIPFRAC = 'masked_mean(meta["clipped"].reshape(response_mask.shape).float(), response_mask)'

VCLIPFRAC = "masked_mean(v_clipped.float(), response_mask)"

BIG = "B8_T64_k4_vf0.5"  # hundreds of tokens per micro-batch: every kind of token is there, whatever the draw

MISTAKES = {
    # one mean over all response tokens of the micro-batch for the actor: long responses weigh more
    "actor_token_level_mean": Mistake(
        "takes one mean over every response token for the actor instead of each response's mean, then the batch mean",
        edited(STEP, (POLICY, "policy_loss = masked_mean(per_token, response_mask)")),
        ["k1_B4_T7_vf0.5", "vf_coef_0_k2_B3_T7", BIG]),
    # the value loss aggregated as the actor's: per response, then over the batch
    "value_loss_per_response_mean": Mistake(
        "aggregates the value loss per response, then over the batch, instead of as value_loss does",
        edited(STEP, (VLOSS, "v_clip = old_values + torch.clamp(values - old_values, "
                                                              "-cliprange_value, cliprange_value)\n"
                                                              "        v_loss = 0.5 * masked_mean(torch.maximum((values - "
                                                              "returns) ** 2, (v_clip - returns) ** 2), response_mask, "
                                                              "dim=-1).mean()")),
        ["k1_B4_T7_vf0.5", "vf_coef_1_k1_B5_T6", BIG]),
    # k micro-batches add up to k times the critic's gradient
    "value_loss_not_divided_by_accumulation_steps": Mistake(
        "does not divide the value loss by gradient_accumulation_steps",
        edited(STEP, (
            LOSS, "loss = policy_loss / gradient_accumulation_steps + vf_coef * v_loss")),
        ["k2_B3_T8_vf1", "k3_B4_T6_vf0.5_eps0.1", BIG]),
    "no_division_by_accumulation_steps": Mistake(
        "does not divide the loss by gradient_accumulation_steps",
        edited(STEP, (LOSS, "loss = policy_loss + vf_coef * v_loss")),
        ["k2_B3_T8_vf1", "k4_B2_T5_vf0.5"]),
    "vf_coef_ignored": Mistake(
        "adds the value loss without the factor vf_coef",
        edited(STEP, (LOSS, "loss = (policy_loss + v_loss) / gradient_accumulation_steps")),
        ["k1_B4_T7_vf0.5", "vf_coef_0_k2_B3_T7"]),
    # the critic's loss on detached values: the critic learns nothing
    "values_detached": Mistake(
        "computes the value loss on detached values, so the critic learns nothing",
        edited(STEP, (VLOSS, VLOSS.replace("value_loss(values,", "value_loss(values.detach(),"))),
        ["k1_B4_T7_vf0.5", "vf_coef_1_k1_B5_T6", BIG]),
    # the value loss computed for the metadata, left out of the backpropagated loss
    "value_loss_not_backpropagated": Mistake(
        "leaves the value loss out of the backpropagated loss",
        edited(STEP, (LOSS, "loss = policy_loss / gradient_accumulation_steps")),
        ["k1_B4_T7_vf0.5", "vf_coef_1_k1_B5_T6"]),
    # the loss before the division by k: not the one backpropagated
    "returns_the_unscaled_loss": Mistake(
        "returns the loss before the division by gradient_accumulation_steps, not the one backpropagated",
        edited(STEP, (
            RETURN, "return (policy_loss + vf_coef * v_loss).detach(), {")),
        ["k2_B3_T8_vf1", "k3_B4_T6_vf0.5_eps0.1"]),
    # the actor's loss alone returned: not the one backpropagated
    "returns_the_policy_loss": Mistake(
        "returns the actor's loss alone, not the combined loss that was backpropagated",
        edited(STEP, (RETURN, "return (policy_loss / gradient_accumulation_steps).detach(), {")),
        ["k1_B4_T7_vf0.5", "k2_B3_T8_vf1"]),
    "without_backward": Mistake(
        "returns the loss without calling backward on it",
        edited(STEP, ("        loss.backward()\n", "")),
        ["k1_B4_T7_vf0.5", BIG]),
    # "fresh" gradients each call: every leaf of the graph (both parameters) zeroed before backward,
    # so micro-batches no longer add up (nor does an existing gradient survive)
    "gradient_replaces_grad": Mistake(
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
        ["existing_grads_k2_B3_T6_vf0.5", "existing_grads_k3_B3_T6_vf1", "k2_B3_T8_vf1"]),
    # one advantage per row (the last position's, as if the reward's token stood for the row)
    "advantages_collapsed_to_one_per_row": Mistake(
        "uses one advantage per row (the last position's) instead of the per-token advantages",
        edited(STEP, (
            "compute_grpo_clip_loss(advantages.reshape(-1, 1)",
            "compute_grpo_clip_loss(advantages[:, -1:].expand_as(advantages).reshape(-1, 1)")),
        ["k1_B4_T7_vf0.5", "square_B5_T5_k2_vf0.5", BIG]),
    # the metadata's value loss as it went into the loss: times vf_coef, divided by k
    "metadata_value_loss_scaled": Mistake(
        "reports the value loss in metadata scaled by vf_coef and divided by k instead of as value_loss returns it",
        edited(STEP, (
            '"value_loss": v_loss.detach()', '"value_loss": (vf_coef * v_loss / gradient_accumulation_steps).detach()')),
        ["k1_B4_T7_vf0.5", "k3_B4_T6_vf0.5_eps0.1"]),
    # the clip fraction over every position, prompt and padding included
    "clip_fraction_over_all_positions": Mistake(
        "computes the clip fraction over every position, prompt and padding included",
        edited(STEP, (CLIPFRAC, 'meta["clipped"].float().mean()')),
        [BIG]),
    # every ratio outside [1 - eps, 1 + eps] counted, whatever the sign of A (for A > 0 a small ratio is not clipped)
    "clip_fraction_counts_every_ratio_outside_the_range": Mistake(
        "counts every ratio outside [1 - eps, 1 + eps] as clipped, whatever the sign of the advantage",
        edited(STEP, (
            CLIPFRAC, "masked_mean(((policy_log_probs - old_log_probs).exp() - 1).abs().gt(cliprange).float(), "
                      "response_mask)")),
        [BIG]),
    # every active value clip counted, also where the unclipped term is the larger (no clip in effect)
    "value_clip_fraction_counts_every_active_clip": Mistake(
        "counts every value outside the clip range, also where the clip has no effect on the loss",
        edited(STEP, (
            VCLIPFRAC, "masked_mean(((values - old_values).abs() > cliprange_value).float(), response_mask)")),
        [BIG]),
    "value_clip_fraction_over_all_positions": Mistake(
        "computes the value clip fraction over every position, prompt and padding included",
        edited(STEP, (VCLIPFRAC, "v_clipped.float().mean()")),
        [BIG]),
    # float64 rollouts computed in float32
    "float32_inside": Mistake(
        "computes in float32: float64 inputs must give float64 results",
        edited(STEP, (
            "        per_token, meta = compute_grpo_clip_loss(",
            "        policy_log_probs, values, advantages, old_log_probs, old_values, returns = (\n"
            "            x.float() for x in (policy_log_probs, values, advantages, old_log_probs, old_values, returns))\n"
            "        per_token, meta = compute_grpo_clip_loss(")),
        ["float64_k2_B3_T8_vf0.5"]),
}
