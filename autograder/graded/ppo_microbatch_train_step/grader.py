"""The grader's side of `ppo_microbatch_train_step` (notebook 11): how its hidden cases are drawn, the
correct versions that must earn full marks and the known mistakes that must lose them, each with the
sentence a student reads (`autograder.mistakes`). Never in a student kit or the grading sandbox,
which hold the folder's __init__.py only.

Hidden cases of `ppo_microbatch_train_step(policy_log_probs, values, response_mask,
gradient_accumulation_steps, *, advantages, old_log_probs, old_values, returns, cliprange,
cliprange_value, vf_coef) -> (loss, metadata)`: notebook 07's clip loss with one advantage per
token, aggregated per response then over the batch, plus vf_coef times the clipped value loss
(one mean over every response token), divided by gradient_accumulation_steps and backpropagated.

Every case runs k micro-batches (k from 1 to 4) whose log-probs are differentiable functions of
ONE shared actor parameter theta (-softplus(scale * theta) - 0.5) and whose values are
differentiable functions of ONE shared critic parameter phi (vscale * phi + 3), so both
gradients must *accumulate* in `.grad` across the calls (on top of existing gradients in some
cases). Outputs, per call: the returned loss, `metadata["policy_loss"]` and
`metadata["value_loss"]` (as numbers in the case's precision: a tensor or a Python float),
`metadata["clip_fraction"]` and `metadata["value_clip_fraction"]` (as float32 numbers in every
case, the float64 one included: the reference computes them in float32, and a student may
compute them exactly, `.item() / .item()`; a wrong count moves them by at least 1 / (B * T)),
and theta's and phi's gradients after the call (a gradient never written counts as 0: a
version that skips the value term when vf_coef is 0 leaves phi's `.grad` unset).

Every token is drawn away from the decisions' edges: the log ratio is at least 0.02 from
log(1 - eps) and log(1 + eps); |V - V_old| is below 0.8 c or above 1.2 c, the return away from
the midpoint of V and clip(V) where the clip is active; and where it is not, V and V_old are
within a factor of 2 of each other, so that V_old + (V - V_old) is V exactly in float32 and in
float64 and the clipped value term equals the unclipped one there (never "strictly larger").
The advantages (N(0, 1) around +-0.5, each micro-batch its own mean) are drawn again until
neither the policy loss nor the whole loss cancels to below a quarter of the size of its terms:
a loss near 0 among terms of size 1 would leave a tolerance (relative to the loss) below the
rounding of another correct order of summation.

What the cases are built to catch:

- every case (responses of lengths 1 and T in every micro-batch): a token-level mean over the
  micro-batch for the actor (07 takes the per-response mean, then the batch mean), the actor's
  per-response aggregation used for the value loss (a token mean of its own);
- `k2_*`, `k3_*`, `k4_*`: no division by gradient_accumulation_steps, or the value loss left
  out of it ((policy_loss + vf_coef * value_loss / k) or policy_loss / k + vf_coef * value_loss);
- `vf_coef_0_*`, `*_vf1_*` beside the `*_vf0.5_*` cases: vf_coef ignored (or applied twice);
- every case with vf_coef > 0: values detached (the critic learns nothing), the value loss
  computed but never backpropagated;
- `existing_grads_*` and every k > 1 case: a gradient that replaces `.grad` instead of adding to
  it; every case: a returned loss that is not the one backpropagated (unscaled, the policy loss
  alone), a step without backward;
- every case (advantages differ from token to token, of both signs, and from prompt to padding):
  advantages collapsed to one per row (`advantages[:, -1:]`, the mean of a row);
- the metadata: policy_loss or value_loss reported scaled (by vf_coef or 1 / k); clip_fraction
  over every position (prompt and padding included), or counting every ratio outside
  [1 - eps, 1 + eps] whatever the sign of A; value_clip_fraction counting every clip that is
  active (|V - V_old| > c), while only the tokens whose clipped term is strictly the larger
  count;
- `float_mask_*`, `long_mask_*`: masks of another dtype than bool;
- `square_B5_T5_*`: B = T, where a tensor transposed or a mean over the wrong dim runs without
  a shape error;
- `float64_*`: float64 computed in float32.

The suite's tripwire forbids calling course_lib's step, value_loss, compute_grpo_clip_loss and
masked_mean: the step is graded on a student's own, so each version carries the functions it
uses (notebook 07's clip loss and masked_mean, notebook 11's value loss) or writes them inline.
"""

from __future__ import annotations

import torch

from autograder.mistakes import edited, Mistake


# ---------------------------------------------------------------- the hidden cases
def make_inputs(gen: torch.Generator) -> list[tuple[str, dict]]:
    import math

    def uniform(shape, lo, hi):
        return lo + (hi - lo) * torch.rand(shape, generator=gen, dtype=torch.float64)

    def signs(shape):
        return torch.where(torch.rand(shape, generator=gen) < 0.5, -1.0, 1.0).double()

    def far_from_cancelling(mask, log_ratio, cliprange, v, vc, returns, vf_coef):
        """Per-token advantages N(0, 1) around +-0.5 (the micro-batch's own mean), drawn again until neither the
        policy loss nor the whole loss cancels to below a quarter of the size of its terms: a loss near 0 among
        terms of size 1 leaves a tolerance (relative to the loss) below the rounding of another correct order
        of summation."""
        m = mask.double()
        ratio = log_ratio.exp()
        value = 0.5 * (torch.maximum((v - returns) ** 2, (vc - returns) ** 2) * m).sum() / m.sum()
        for _ in range(100):
            a = torch.randn(mask.shape, generator=gen, dtype=torch.float64) + 0.5 * float(signs(()))
            term = -torch.minimum(ratio * a, ratio.clamp(1 - cliprange, 1 + cliprange) * a)
            policy = ((term * m).sum(-1) / m.sum(-1)).mean()
            size = ((term.abs() * m).sum(-1) / m.sum(-1)).mean()
            if abs(policy) >= 0.25 * size and abs(policy + vf_coef * value) >= 0.25 * (size + vf_coef * value):
                return a
        raise RuntimeError("no draw of advantages kept the policy loss away from 0")

    def case(B, T, k, vf_coef=0.5, dtype=torch.float32, mask_kind="bool", cliprange=0.2, cliprange_value=0.2,
             initial_grads=False):
        theta = torch.randn(B, T, generator=gen, dtype=torch.float64).to(dtype)
        phi = uniform((B, T), -1.0, 1.0).to(dtype)
        micro = []
        for _ in range(k):
            # a response of its own length in every row (at least one token), after a prompt
            starts = torch.randint(0, max(1, T // 3), (B,), generator=gen)
            lengths = torch.randint(1, T + 1, (B,), generator=gen)
            lengths[0], lengths[-1] = 1, T  # one short and one long response: sequence and token means differ
            cols = torch.arange(T)
            mask = (cols >= starts[:, None]) & (cols < (starts + lengths)[:, None])
            # the actor: log ratio -old_shift in (-0.5, 0.5), at least 0.02 from log(1 - eps) and log(1 + eps)
            log_ratio = uniform((B, T), -0.5, 0.5)
            for edge in (math.log(1 - cliprange), math.log(1 + cliprange)):
                near = (log_ratio - edge).abs() < 0.02
                log_ratio = torch.where(near, edge + 0.03 * torch.where(log_ratio >= edge, 1.0, -1.0), log_ratio)
            scale = uniform((B, T), 0.1, 2.1).to(dtype)
            # the critic: V = vscale * phi + 3 in [2, 4]; |V - V_old| in [0, 0.8 c) or (1.2 c, 3 c]
            vscale = uniform((B, T), 0.5, 1.0).to(dtype)
            v = vscale.double() * phi.double() + 3.0
            active = torch.rand(B, T, generator=gen) < 0.5
            moves = signs((B, T)) * torch.where(active, uniform((B, T), 1.2 * cliprange_value, 3.0 * cliprange_value),
                                                uniform((B, T), 0.0, 0.8 * cliprange_value))
            vc = v - moves + moves.clamp(-cliprange_value, cliprange_value)  # clip(V) around V_old = V - moves
            t = torch.where(torch.rand(B, T, generator=gen) < 0.5, uniform((B, T), -2.0, 0.4), uniform((B, T), 0.6, 3.0))
            returns = torch.where(active, v + t * (vc - v), v + 0.7 * torch.randn(B, T, generator=gen, dtype=torch.float64))
            advantages = far_from_cancelling(mask, log_ratio, cliprange, v, vc, returns, vf_coef)
            micro.append({
                "mask": {"bool": mask, "float": mask.float(), "long": mask.long()}[mask_kind],
                "scale": scale,
                "old_shift": (-log_ratio).to(dtype),
                "advantages": advantages.to(dtype),
                "vscale": vscale,
                "value_shift": (-moves).to(dtype),  # V_old = V + value_shift
                "returns": returns.to(dtype),
            })
        grad = (lambda: torch.randn(B, T, generator=gen, dtype=torch.float64).to(dtype)) if initial_grads else (lambda: None)
        return {
            "theta": theta, "phi": phi, "micro_batches": micro, "gradient_accumulation_steps": k,
            "cliprange": cliprange, "cliprange_value": cliprange_value, "vf_coef": vf_coef,
            "initial_grad_theta": grad(), "initial_grad_phi": grad(),
        }

    return [
        ("k1_B4_T7_vf0.5", case(4, 7, 1)),
        ("k2_B3_T8_vf1", case(3, 8, 2, vf_coef=1.0)),
        ("k3_B4_T6_vf0.5_eps0.1", case(4, 6, 3, cliprange=0.1)),
        ("k4_B2_T5_vf0.5", case(2, 5, 4)),
        ("vf_coef_0_k2_B3_T7", case(3, 7, 2, vf_coef=0.0)),
        ("vf_coef_1_k1_B5_T6", case(5, 6, 1, vf_coef=1.0)),
        ("existing_grads_k2_B3_T6_vf0.5", case(3, 6, 2, initial_grads=True)),
        ("existing_grads_k3_B3_T6_vf1", case(3, 6, 3, vf_coef=1.0, initial_grads=True)),
        ("float_mask_k2_B3_T7_vf0.5", case(3, 7, 2, mask_kind="float")),
        ("long_mask_k2_B3_T7_vf1", case(3, 7, 2, vf_coef=1.0, mask_kind="long")),
        ("square_B5_T5_k2_vf0.5", case(5, 5, 2)),
        ("value_clip_0.5_k2_B4_T6_vf0.5", case(4, 6, 2, cliprange_value=0.5)),
        ("float64_k2_B3_T8_vf0.5", case(3, 8, 2, dtype=torch.float64)),
        ("B1_T12_k2_vf0.5", case(1, 12, 2)),
        ("B8_T64_k4_vf0.5", case(8, 64, 4)),
    ]


# ---------------------------------------------------------------- the correct versions
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
# the correct version 'helpers_one_token_per_row' (autograder/graded/ppo_microbatch_train_step/test_ppo_microbatch_train_step.py), which the edits start from
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


CORRECT = {
    # 07's loss with every token as a row of its own (its advantage a (B*T, 1) column), as the reference
    "helpers_one_token_per_row": STEP,
    # everything inline: per-token advantages broadcast as they are, sums over the mask, counts as Python numbers
    "inline_where": """
    import torch
    def ppo_microbatch_train_step(policy_log_probs, values, response_mask, gradient_accumulation_steps, *, advantages,
                                  old_log_probs, old_values, returns, cliprange, cliprange_value, vf_coef):
        keep = response_mask.bool()
        ratio = torch.exp(policy_log_probs - old_log_probs)
        surr1 = ratio * advantages
        surr2 = torch.clamp(ratio, 1 - cliprange, 1 + cliprange) * advantages
        pg = torch.where(keep, -torch.min(surr1, surr2), torch.zeros_like(surr1))
        policy_loss = (pg.sum(dim=1) / keep.sum(dim=1)).mean()
        v_clip = torch.clamp(values, old_values - cliprange_value, old_values + cliprange_value)
        vf1, vf2 = (values - returns) ** 2, (v_clip - returns) ** 2
        vf = torch.where(keep, torch.max(vf1, vf2), torch.zeros_like(vf1))
        v_loss = 0.5 * vf.sum() / keep.sum()
        loss = (policy_loss + vf_coef * v_loss) / gradient_accumulation_steps
        loss.backward()
        n = keep.sum().item()
        return loss.detach(), {
            "policy_loss": policy_loss.item(), "value_loss": v_loss.item(),
            "clip_fraction": ((surr2 < surr1) & keep).sum().item() / n,
            "value_clip_fraction": ((vf2 > vf1) & keep).sum().item() / n,
        }
    """,
    # row by row with boolean indexing: the actor's per-response means, the critic's sum and count
    "loop_over_rows": """
    import torch
    def ppo_microbatch_train_step(policy_log_probs, values, response_mask, gradient_accumulation_steps, *, advantages,
                                  old_log_probs, old_values, returns, cliprange, cliprange_value, vf_coef):
        keep = response_mask.bool()
        row_losses, v_total, n, clipped, v_clipped = [], 0.0, 0, 0, 0
        for i in range(keep.shape[0]):
            m = keep[i]
            a, lp, old = advantages[i][m], policy_log_probs[i][m], old_log_probs[i][m]
            ratio = (lp - old).exp()
            unclipped = ratio * a
            clip = ratio.clamp(1 - cliprange, 1 + cliprange) * a
            row_losses.append(-torch.minimum(unclipped, clip).mean())
            v, v_old, r = values[i][m], old_values[i][m], returns[i][m]
            v_clip = v_old + (v - v_old).clamp(-cliprange_value, cliprange_value)
            sq, sq_clip = (v - r) ** 2, (v_clip - r) ** 2
            v_total = v_total + torch.maximum(sq, sq_clip).sum()
            n += int(m.sum())
            clipped += int((clip < unclipped).sum())
            v_clipped += int((sq_clip > sq).sum())
        policy_loss = torch.stack(row_losses).mean()
        v_loss = 0.5 * v_total / n
        loss = (policy_loss + vf_coef * v_loss) / gradient_accumulation_steps
        loss.backward()
        return loss.detach(), {"policy_loss": policy_loss.detach(), "value_loss": v_loss.detach(),
                               "clip_fraction": clipped / n, "value_clip_fraction": v_clipped / n}
    """,
    # the losses in float64, backpropagated through the casts, returned in the inputs' dtype
    "float64_inside": """
    import torch
    def ppo_microbatch_train_step(policy_log_probs, values, response_mask, gradient_accumulation_steps, *, advantages,
                                  old_log_probs, old_values, returns, cliprange, cliprange_value, vf_coef):
        m = response_mask.double()
        lp, old, a = policy_log_probs.double(), old_log_probs.double(), advantages.double()
        ratio = torch.exp(lp - old)
        obj = torch.minimum(ratio * a, ratio.clamp(1 - cliprange, 1 + cliprange) * a)
        policy_loss = (-(obj * m).sum(-1) / m.sum(-1)).mean()
        v, v_old, r = values.double(), old_values.double(), returns.double()
        v_clip = v_old + (v - v_old).clamp(-cliprange_value, cliprange_value)
        per_token = 0.5 * torch.maximum((v - r) ** 2, (v_clip - r) ** 2)
        v_loss = (per_token * m).sum() / m.sum()
        loss = (policy_loss + vf_coef * v_loss) / gradient_accumulation_steps
        loss.backward()
        dtype = policy_log_probs.dtype
        clipped = (ratio.clamp(1 - cliprange, 1 + cliprange) * a < ratio * a).double()
        v_clipped = ((v_clip - r) ** 2 > (v - r) ** 2).double()
        return loss.detach().to(dtype), {
            "policy_loss": policy_loss.detach().to(dtype), "value_loss": v_loss.detach().to(dtype),
            "clip_fraction": (clipped * m).sum() / m.sum(), "value_clip_fraction": (v_clipped * m).sum() / m.sum(),
        }
    """,
    # every token's weight written out (actor: 1 / (its response's length * B); critic: 1 / the token count),
    # and one backward per network, each already divided by the accumulation steps
    "token_weights_two_backwards": """
    import torch
    def ppo_microbatch_train_step(policy_log_probs, values, response_mask, gradient_accumulation_steps, *, advantages,
                                  old_log_probs, old_values, returns, cliprange, cliprange_value, vf_coef):
        m = response_mask.to(policy_log_probs.dtype)
        B = m.shape[0]
        actor_w = m / m.sum(dim=1, keepdim=True) / B
        critic_w = m / m.sum()
        log_ratio = policy_log_probs - old_log_probs
        ratio = log_ratio.exp()
        pg = -torch.where(advantages >= 0, torch.minimum(ratio, torch.full_like(ratio, 1 + cliprange)),
                          torch.maximum(ratio, torch.full_like(ratio, 1 - cliprange))) * advantages
        policy_loss = (pg * actor_w).sum()
        v_clip = torch.clamp(values, old_values - cliprange_value, old_values + cliprange_value)
        per_token = torch.stack([(values - returns).square(), (v_clip - returns).square()]).amax(dim=0)
        v_loss = 0.5 * (per_token * critic_w).sum()
        (policy_loss / gradient_accumulation_steps).backward()
        (vf_coef * v_loss / gradient_accumulation_steps).backward()
        keep = response_mask.bool()
        clipped = ((ratio > 1 + cliprange) & (advantages > 0)) | ((ratio < 1 - cliprange) & (advantages < 0))
        v_clipped = (v_clip - returns).square() > (values - returns).square()
        loss = (policy_loss + vf_coef * v_loss) / gradient_accumulation_steps
        return loss.detach(), {"policy_loss": policy_loss.detach(), "value_loss": v_loss.detach(),
                               "clip_fraction": clipped[keep].float().mean(),
                               "value_clip_fraction": v_clipped[keep].float().mean()}
    """,
}


# ---------------------------------------------------------------- the known mistakes
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
