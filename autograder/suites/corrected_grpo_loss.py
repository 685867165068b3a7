"""Hidden cases of `corrected_grpo_loss(advantages, policy_log_probs, old_log_probs, rollout_log_probs,
response_mask, cliprange, mode, cap, aggregate="sum") -> (loss, metadata)` (notebook 15): the
GRPO-clip loss with importance weights w = importance_weights(old, rollout, ...) (detached),
per-token loss w * -min(ratio * A, clip(ratio) * A) with ratio = exp(policy - old), averaged
over each row's kept tokens (the mask modes drop the tokens whose w is 0 from the denominator;
a row with none contributes 0) and then over the rows.

Masks are one contiguous response per row (prompt, response, padding). log(pi_old / pi_rollout)
is drawn as `importance_weights`' cases draw it (a ratio above cap and one below 1 / cap
planted in the token modes, each row's sum or mean on both sides of log cap in the sequence
modes, nothing within rounding of log cap); log(pi / pi_old) is uniform in (-0.5, 0.5), at
least 1e-3 from log(1 - eps) and log(1 + eps), so that no clip decision is rounding's.
Advantages N(0, 1) of both signs, one 0 (in the float64 cases of one sign, 0.1 or more in
magnitude: rows of both signs can cancel in the mean to far below its terms, and a float64 case
is its own truth, so that no other rounding than the reference's own would set the tolerance). rollout_log_probs holds garbage of magnitude 5 to 50
where the mask is 0 (what an engine that reports no prompt log-prob leaves there); the policy and
old log-probs are ordinary log-probs everywhere. Float32 and float64; caps 1.5 to 3; eps 0.1 to
0.3.

Outputs: the loss, its gradient with respect to policy_log_probs (loss.backward()), the three
metadata entries, and whether rollout_log_probs (which requires grad in every case) got no
gradient (None or 0): the weights are constants of the loss.

What the cases are built to catch:

- every case: the weights' ratio inverted (pi_rollout / pi_old), the weights put on the ratio
  inside the clip instead of on the clipped term, the weights left out;
- `token_mask_*`, `sequence_mask_*`: a rejected token kept in its row's denominator; the
  clip fraction over every response token instead of the kept ones;
- `sequence_mask_*` (rows rejected whole) and `all_rejected_*`: a row without kept tokens
  dropped from the mean over rows, a 0 / 0 = NaN where every token is rejected, a loss out of
  the graph there (a constant 0 for a rejected row: backward raises instead of a zero gradient);
- `rows_of_different_lengths_*`, every case: one mean over all the batch's kept tokens
  instead of the mean of per-row means;
- every sequence case (garbage in rollout_log_probs off the mask): the row's sum over every
  position;
- `rollout_gets_no_gradient`: weights not detached (a gradient into rollout_log_probs);
- `float64_*`: float64 computed or returned in float32.
"""

from __future__ import annotations

import math

import torch

GRADED = "corrected_grpo_loss"
# grader-only: each row's term one unit of its rounding up (the mean over rows of either sign can
# cancel to far below its terms, so that the reference's own rounding is no measure of another order's)
VARIANTS = ["autograder.suites.corrected_grpo_loss:variant_rows_one_ulp_up"]


def make_inputs(gen: torch.Generator) -> list[tuple[str, dict]]:
    from ._response_mask_cases import MaskDraw

    d = MaskDraw(gen)

    def case(spans, T, mode, cap, cliprange=0.2, aggregate="sum", dtype=torch.float32, targets=None, adv_sign=0):
        B = len(spans)
        m = d.mask_of(T, spans)
        x = d.capped_log_ratios(spans, T, mode, cap, aggregate, targets)
        old, rollout = d.log_prob_pair(x, m, garbage=False)
        rollout = torch.where(m, rollout, d.garbage(B, T))
        step = -0.5 + torch.rand(B, T, generator=gen, dtype=torch.float64)
        step = d.away_from(step, [math.log(1 - cliprange), math.log(1 + cliprange)], 1e-3)
        adv = torch.randn(B, 1, generator=gen, dtype=torch.float64)
        if adv_sign:
            adv = adv_sign * (adv.abs() + 0.1)
        adv[-1, 0] = 0.0
        # a rejected token is never clipped (ratio 1) and a kept one of a row with an advantage is:
        # the two clip fractions (over the kept tokens, over every token) then differ on every draw
        rejected = _rejected(x, m, mode, cap, aggregate)
        step = torch.where(rejected, torch.zeros_like(step), step)
        kept_signal = m & ~rejected & (adv != 0)
        if kept_signal.any():
            b, t = kept_signal.nonzero()[0].tolist()
            step[b, t] = 0.4 * float(adv[b, 0].sign())  # beyond 1 +- eps (eps <= 0.3) on the side the clip binds
        policy = old + step
        return {"advantages": adv.to(dtype), "policy_log_probs": policy.to(dtype), "old_log_probs": old.to(dtype),
                "rollout_log_probs": rollout.to(dtype), "response_mask": m, "cliprange": cliprange, "mode": mode,
                "cap": cap, "aggregate": aggregate}

    lengths = [(0, 2), (1, 14), (3, 6), (2, 12), (0, 16)]
    return [
        ("token_truncate_cap2_eps0.2_B4_T16", case(d.spans(4, 16), 16, "token_truncate", 2.0)),
        ("token_mask_cap2_eps0.2_B4_T16", case(d.spans(4, 16), 16, "token_mask", 2.0)),
        ("token_mask_cap1.5_eps0.1_B5_T20", case(d.spans(5, 20), 20, "token_mask", 1.5, cliprange=0.1)),
        ("sequence_truncate_sum_cap2_B6_T16", case(d.spans(6, 16), 16, "sequence_truncate", 2.0)),
        ("sequence_mask_sum_cap2_B6_T16", case(d.spans(6, 16), 16, "sequence_mask", 2.0)),
        ("sequence_mask_mean_cap1.5_eps0.3_B6_T16", case(d.spans(6, 16), 16, "sequence_mask", 1.5, cliprange=0.3,
                                                         aggregate="mean")),
        ("sequence_truncate_mean_cap3_B4_T20", case(d.spans(4, 20), 20, "sequence_truncate", 3.0, aggregate="mean")),
        ("all_rejected_sequence_mask_B4_T12", case(d.spans(4, 12), 12, "sequence_mask", 2.0,
                                                   targets=torch.tensor([1.5, 2.0, 3.0, 1.0], dtype=torch.float64))),
        ("rows_of_different_lengths_token_truncate_B5_T16", case(lengths, 16, "token_truncate", 2.0)),
        ("rows_of_different_lengths_sequence_mask_B5_T16", case(lengths, 16, "sequence_mask", 2.0)),
        ("float64_token_mask_cap2_B4_T12", case(d.spans(4, 12), 12, "token_mask", 2.0, dtype=torch.float64,
                                                adv_sign=1)),
        ("float64_sequence_truncate_sum_cap2_B4_T12", case(d.spans(4, 12), 12, "sequence_truncate", 2.0,
                                                           dtype=torch.float64, adv_sign=-1)),
        ("B8_T64_token_truncate_cap2", case(d.spans(8, 64, lengths=(10, 50)), 64, "token_truncate", 2.0)),
    ]


def _rejected(x: torch.Tensor, m: torch.Tensor, mode: str, cap: float, aggregate: str) -> torch.Tensor:
    """(B, T) bool: the response tokens a mask mode rejects for the log-ratios x (none for a
    truncate mode); x keeps every decision 1e-4 or more from log cap, beyond float32 rounding."""
    if mode.endswith("truncate"):
        return torch.zeros_like(m)
    if mode.startswith("token"):
        return m & (x > math.log(cap))
    row = torch.where(m, x, torch.zeros_like(x)).sum(-1, keepdim=True)
    if aggregate == "mean":
        row = row / m.sum(-1, keepdim=True).clamp(min=1)
    return m & (row > math.log(cap))


def variant_rows_one_ulp_up(advantages, policy_log_probs, old_log_probs, rollout_log_probs, response_mask,
                            cliprange, mode, cap, aggregate="sum"):
    """Grader-only: the reference with each row's mean moved one unit of its rounding up before the
    mean over rows, as a correct sum in another order lands; the gradient left as it is."""
    from course_lib import corrected_grpo_loss, importance_weights
    from course_lib.grpo import compute_grpo_clip_loss

    _, metadata = corrected_grpo_loss(advantages, policy_log_probs, old_log_probs, rollout_log_probs, response_mask,
                                      cliprange, mode, cap, aggregate=aggregate)
    w = importance_weights(old_log_probs, rollout_log_probs, response_mask, mode, cap, aggregate=aggregate)
    per_token, _ = compute_grpo_clip_loss(advantages, policy_log_probs, old_log_probs, cliprange)
    m = response_mask.bool()
    kept = m & (w > 0) if mode.endswith("mask") else m
    rows = torch.where(kept, w * per_token, torch.zeros_like(per_token)).sum(-1) / kept.sum(-1).clamp(min=1)
    moved = torch.nextafter(rows.detach(), torch.tensor(float("inf"), dtype=rows.dtype))
    rows = rows + torch.where(kept.any(-1), moved - rows.detach(), torch.zeros_like(moved))
    return rows.mean(), metadata


def call(fn, inputs: dict) -> dict:
    policy = inputs["policy_log_probs"].clone().requires_grad_()
    rollout = inputs["rollout_log_probs"].clone().requires_grad_()
    loss, metadata = fn(inputs["advantages"].clone(), policy, inputs["old_log_probs"].clone(), rollout,
                        inputs["response_mask"].clone(), inputs["cliprange"], inputs["mode"], inputs["cap"],
                        aggregate=inputs["aggregate"])
    loss.backward()
    return {"loss": loss, "grad_policy_log_probs": policy.grad,
            "weights": metadata["weights"], "kept_fraction": metadata["kept_fraction"],
            "clip_fraction": metadata["clip_fraction"],
            "rollout_gets_no_gradient": rollout.grad is None or not bool(rollout.grad.any())}
