"""Hidden cases of `ppo_microbatch_train_step(policy_log_probs, values, response_mask,
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
"""

from __future__ import annotations

import torch

GRADED = "ppo_microbatch_train_step"
# the step is graded on the student's own clip loss, value loss and masked_mean: calling the course_lib copies does not count
TRIPWIRE = ["ppo_microbatch_train_step", "value_loss", "compute_grpo_clip_loss", "masked_mean"]


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


def call(fn, inputs: dict) -> dict:
    theta = inputs["theta"].clone().requires_grad_()
    phi = inputs["phi"].clone().requires_grad_()
    if inputs["initial_grad_theta"] is not None:
        theta.grad = inputs["initial_grad_theta"].clone()
    if inputs["initial_grad_phi"] is not None:
        phi.grad = inputs["initial_grad_phi"].clone()
    k = inputs["gradient_accumulation_steps"]
    out = {key: [] for key in ("losses", "policy_losses", "value_losses", "clip_fractions", "value_clip_fractions",
                               "grads_theta_after_each_call", "grads_phi_after_each_call")}
    for mb in inputs["micro_batches"]:
        # log-probs below -0.5 that depend on the actor's parameter, values that depend on the critic's
        log_probs = -torch.nn.functional.softplus(mb["scale"] * theta) - 0.5
        values = mb["vscale"] * phi + 3.0
        loss, metadata = fn(log_probs, values, mb["mask"].clone(), k, advantages=mb["advantages"].clone(),
                            old_log_probs=log_probs.detach() + mb["old_shift"],
                            old_values=values.detach() + mb["value_shift"], returns=mb["returns"].clone(),
                            cliprange=inputs["cliprange"], cliprange_value=inputs["cliprange_value"],
                            vf_coef=inputs["vf_coef"])
        out["losses"].append(torch.as_tensor(loss).detach().reshape(()))
        # the metadata's losses as numbers in the case's precision, its fractions as float32 numbers
        for key, name, dtype in (("policy_losses", "policy_loss", theta.dtype), ("value_losses", "value_loss", theta.dtype),
                                 ("clip_fractions", "clip_fraction", torch.float32),
                                 ("value_clip_fractions", "value_clip_fraction", torch.float32)):
            out[key].append(torch.tensor(float(metadata[name]), dtype=dtype))
        for key, p in (("grads_theta_after_each_call", theta), ("grads_phi_after_each_call", phi)):
            out[key].append(p.grad.detach().clone() if p.grad is not None else torch.zeros_like(p.detach()))
    return out
