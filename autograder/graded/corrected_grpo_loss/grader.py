"""The grader's side of `corrected_grpo_loss` (notebook 15): how its hidden cases are drawn, the
correct versions that must earn full marks and the known mistakes that must lose them, each with the
sentence a student reads (`autograder.mistakes`). Never in a student kit or the grading sandbox,
which hold the folder's __init__.py only.

Hidden cases of `corrected_grpo_loss(advantages, policy_log_probs, old_log_probs, rollout_log_probs,
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

from autograder.graded._response_mask_cases import MaskDraw
from autograder.mistakes import edited, Mistake


# ---------------------------------------------------------------- the hidden cases
# grader-only: each row's term one unit of its rounding up (the mean over rows of either sign can
# cancel to far below its terms, so that the reference's own rounding is no measure of another order's)
VARIANTS = ["autograder.graded.corrected_grpo_loss.grader:variant_rows_one_ulp_up"]


def make_inputs(gen: torch.Generator) -> list[tuple[str, dict]]:

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


# ---------------------------------------------------------------- the correct versions
# the correct version 'where_and_row_counts' (autograder/graded/corrected_grpo_loss/test_corrected_grpo_loss.py), which the edits start from
WHERE = """
        import torch
        def corrected_grpo_loss(advantages, policy_log_probs, old_log_probs, rollout_log_probs, response_mask,
                                cliprange, mode, cap, aggregate="sum"):
            m = response_mask.bool()
            with torch.no_grad():
                log_w = torch.where(m, old_log_probs - rollout_log_probs, torch.zeros_like(old_log_probs))
                if mode.startswith("sequence"):
                    log_w = log_w.sum(-1, keepdim=True)
                    if aggregate == "mean":
                        log_w = log_w / m.sum(-1, keepdim=True).clamp(min=1)
                    log_w = log_w.expand_as(old_log_probs)
                r = torch.exp(log_w)
                w = r.clamp(max=cap) if mode.endswith("truncate") else torch.where(r <= cap, r, torch.zeros_like(r))
                w = torch.where(m, w, torch.zeros_like(w))
            ratio = torch.exp(policy_log_probs - old_log_probs)
            unclipped = ratio * advantages
            clipped = torch.clamp(ratio, 1 - cliprange, 1 + cliprange) * advantages
            per_token = -torch.minimum(unclipped, clipped) * w
            kept = m & (w > 0) if mode.endswith("mask") else m
            count = kept.sum(-1)
            rows = torch.where(kept, per_token, torch.zeros_like(per_token)).sum(-1) / count.clamp(min=1)
            loss = rows.mean()
            n_kept = kept.sum()
            frac = n_kept.to(loss.dtype) / m.sum().clamp(min=1).to(loss.dtype)
            clip_frac = ((clipped < unclipped) & kept).sum().to(loss.dtype) / n_kept.clamp(min=1).to(loss.dtype)
            return loss, {"weights": w, "kept_fraction": frac, "clip_fraction": clip_frac}
    """

# the correct version 'loop_over_rows_boolean_indexing' (autograder/graded/corrected_grpo_loss/test_corrected_grpo_loss.py), which the edits start from
LOOP = """
        import torch
        def corrected_grpo_loss(advantages, policy_log_probs, old_log_probs, rollout_log_probs, response_mask,
                                cliprange, mode, cap, aggregate="sum"):
            B, T = policy_log_probs.shape
            m = response_mask.bool()
            old_d, roll_d = old_log_probs.detach(), rollout_log_probs.detach()
            weights = torch.zeros(B, T, dtype=old_log_probs.dtype)
            rows = []
            n_kept = n_clipped = n_response = 0
            for b in range(B):
                idx = m[b].nonzero().flatten()
                n_response += len(idx)
                log_r = old_d[b, idx] - roll_d[b, idx]
                if mode.startswith("sequence") and len(idx):
                    s = log_r.sum() if aggregate == "sum" else log_r.mean()
                    log_r = s.expand(len(idx))
                r = log_r.exp()
                w = torch.minimum(r, torch.tensor(cap, dtype=r.dtype)) if "truncate" in mode else r * (r <= cap)
                weights[b, idx] = w
                if "mask" in mode:
                    idx, w = idx[w > 0], w[w > 0]
                if len(idx) == 0:
                    rows.append(policy_log_probs[b, idx].sum())  # 0, still in the graph
                    continue
                ratio = torch.exp(policy_log_probs[b, idx] - old_log_probs[b, idx])
                a = advantages[b, 0]
                lo = ratio * a
                hi = ratio.clamp(1 - cliprange, 1 + cliprange) * a
                rows.append((-w * torch.minimum(lo, hi)).mean())
                n_kept += len(idx)
                n_clipped += int((hi < lo).sum())
            loss = torch.stack(rows).mean()
            return loss, {"weights": weights, "kept_fraction": torch.tensor(n_kept / max(n_response, 1), dtype=loss.dtype),
                          "clip_fraction": torch.tensor(n_clipped / max(n_kept, 1), dtype=loss.dtype)}
    """


CORRECT = {
    "where_and_row_counts": WHERE,
    # one row at a time, boolean indexing of its response, the weights from detached tensors
    "loop_over_rows_boolean_indexing": LOOP,
    # float64 inside (the loss cast back), products with float masks, weights in log space
    "float64_products_log_space": """
        import math
        import torch
        def corrected_grpo_loss(advantages, policy_log_probs, old_log_probs, rollout_log_probs, response_mask,
                                cliprange, mode, cap, aggregate="sum"):
            dtype = policy_log_probs.dtype
            mf = response_mask.double()
            pol, old = policy_log_probs.double(), old_log_probs.double()
            diff = (old - rollout_log_probs.double()).detach().masked_fill(mf == 0, 0.0)
            if mode in ("sequence_truncate", "sequence_mask"):
                n = mf.sum(1, keepdim=True)
                diff = diff.sum(1, keepdim=True) / (n.clamp(min=1) if aggregate == "mean" else 1.0) * torch.ones_like(mf)
            if mode.endswith("truncate"):
                w = torch.exp(diff.clamp(max=math.log(cap))) * mf
                kept = mf
            else:
                ok = (diff <= math.log(cap)).double() * mf
                w = torch.exp(diff.clamp(max=math.log(cap))) * ok
                kept = (w > 0).double()
            ratio = torch.exp(pol - old)
            a = advantages.double()
            surrogate = torch.maximum(-ratio * a, -ratio.clamp(1 - cliprange, 1 + cliprange) * a)
            per_row = (w * surrogate * kept).sum(1) / kept.sum(1).clamp(min=1)
            loss = per_row.mean().to(dtype)
            clipped = (ratio.clamp(1 - cliprange, 1 + cliprange) * a < ratio * a).double() * kept
            return loss, {"weights": w.to(dtype), "kept_fraction": (kept.sum() / mf.sum().clamp(min=1)).to(dtype),
                          "clip_fraction": (clipped.sum() / kept.sum().clamp(min=1)).to(dtype)}
    """,
    # the masks first as float weights per token, the row means by a (B, T) normaliser
    "token_weights_normalised_per_row": """
        import torch
        def corrected_grpo_loss(advantages, policy_log_probs, old_log_probs, rollout_log_probs, response_mask,
                                cliprange, mode, cap, aggregate="sum"):
            resp = response_mask != 0
            level, kind = mode.split("_")
            lr = (old_log_probs - rollout_log_probs).detach()
            lr = torch.where(resp, lr, torch.zeros_like(lr))
            if level == "sequence":
                s = lr.sum(dim=-1, keepdim=True)
                if aggregate == "mean":
                    s = s / resp.sum(dim=-1, keepdim=True).clamp(min=1)
                lr = s.repeat(1, lr.shape[-1])
            ratio_w = lr.exp()
            if kind == "truncate":
                w = torch.where(resp, torch.clamp(ratio_w, max=cap), torch.zeros_like(ratio_w))
                keep = resp
            else:
                w = torch.where(resp & (ratio_w <= cap), ratio_w, torch.zeros_like(ratio_w))
                keep = w > 0
            keep_f = keep.to(policy_log_probs.dtype)
            norm = keep_f / keep_f.sum(-1, keepdim=True).clamp(min=1) / keep_f.shape[0]
            ratio = (policy_log_probs - old_log_probs).exp()
            adv = advantages.reshape(-1, 1)
            obj = torch.min(ratio * adv, ratio.clamp(1.0 - cliprange, 1.0 + cliprange) * adv)
            loss = -(torch.where(keep, w * obj, torch.zeros_like(obj)) * norm).sum()
            is_clipped = keep & (ratio.clamp(1.0 - cliprange, 1.0 + cliprange) * adv < ratio * adv)
            n = keep_f.sum()
            return loss, {"weights": w, "kept_fraction": n / resp.sum().clamp(min=1).to(n.dtype),
                          "clip_fraction": is_clipped.sum().to(n.dtype) / n.clamp(min=1)}
    """,
}


# ---------------------------------------------------------------- the known mistakes
MISTAKES = {
    # a rejected token's 0 still divides its row
    "rejected_tokens_in_the_denominator": Mistake(
        "counts rejected tokens (weight 0) in each row's denominator",
        edited(WHERE, ("count = kept.sum(-1)", "count = m.sum(-1)")),
        ["token_mask_cap2_eps0.2_B4_T16", "token_mask_cap1.5_eps0.1_B5_T20"]),
    # the weights from tensors still in the graph: a gradient flows into the rollout's log-probs
    "weights_not_detached": Mistake(
        "computes the weights from tensors still in the graph, so a gradient flows through them",
        edited(WHERE, ("with torch.no_grad():", "if True:")),
        ["token_truncate_cap2_eps0.2_B4_T16", "sequence_truncate_sum_cap2_B6_T16"]),
    # the weights put on the ratio inside the clip: the clip then acts on w * ratio
    "weights_inside_the_clip": Mistake(
        "multiplies the ratio by the weights inside the clip instead of weighting the clipped loss",
        edited(WHERE, ("ratio = torch.exp(policy_log_probs - old_log_probs)",
                                                   "ratio = w * torch.exp(policy_log_probs - old_log_probs)"),
                                           ("per_token = -torch.minimum(unclipped, clipped) * w",
                                            "per_token = -torch.minimum(unclipped, clipped)")),
        ["token_truncate_cap2_eps0.2_B4_T16", "sequence_truncate_sum_cap2_B6_T16"]),
    # one mean over the batch's kept tokens: a long row's tokens weigh as much as a short row's
    "mean_over_every_token_of_the_batch": Mistake(
        "takes one mean over the batch's kept tokens instead of each row's mean, then the mean of the rows",
        edited(WHERE, ("loss = rows.mean()",
                                                              "loss = torch.where(kept, per_token, torch.zeros_like(per_token)).sum() / kept.sum().clamp(min=1)")),
        ["rows_of_different_lengths_token_truncate_B5_T16",
         "B8_T64_token_truncate_cap2"]),
    "weights_ratio_inverted": Mistake(
        "computes the weights as rollout / train instead of train / rollout",
        edited(WHERE, ("old_log_probs - rollout_log_probs", "rollout_log_probs - old_log_probs")),
        ["token_truncate_cap2_eps0.2_B4_T16", "sequence_mask_sum_cap2_B6_T16"]),
    "weights_left_out": Mistake(
        "leaves the importance weights out of the loss",
        edited(WHERE, ("per_token = -torch.minimum(unclipped, clipped) * w",
                                            "per_token = -torch.minimum(unclipped, clipped)")),
        ["token_truncate_cap2_eps0.2_B4_T16", "sequence_truncate_mean_cap3_B4_T20"]),
    # a row without kept tokens: 0 / 0
    "row_mean_not_guarded": Mistake(
        "divides a row without kept tokens by 0, giving NaN",
        edited(WHERE, ("/ count.clamp(min=1)", "/ count")),
        ["all_rejected_sequence_mask_B4_T12", "sequence_mask_sum_cap2_B6_T16"]),
    # the mean over the rows that kept a token: a rejected row no longer counts
    "rejected_rows_out_of_the_mean": Mistake(
        "averages over the rows that kept a token only, so a rejected row no longer counts",
        edited(WHERE, ("loss = rows.mean()",
                                                         "loss = rows[count > 0].sum() / (count > 0).sum().clamp(min=1)")),
        ["sequence_mask_sum_cap2_B6_T16", "rows_of_different_lengths_sequence_mask_B5_T16"]),
    "clip_fraction_over_every_response_token": Mistake(
        "counts the clip fraction over every response token instead of the kept ones",
        edited(WHERE, ("((clipped < unclipped) & kept).sum().to(loss.dtype) / n_kept.clamp(min=1).to(loss.dtype)",
                                                                   "((clipped < unclipped) & m).sum().to(loss.dtype) / m.sum().to(loss.dtype)")),
        ["sequence_mask_sum_cap2_B6_T16", "token_mask_cap2_eps0.2_B4_T16"]),
    # the row's sum over every position: the rollout's garbage off the mask in it
    "sequence_sum_over_every_position": Mistake(
        "sums a sequence's log-ratio over every position instead of the response tokens only",
        edited(WHERE, ("log_w = log_w.sum(-1, keepdim=True)",
                                                            "log_w = (old_log_probs - rollout_log_probs).sum(-1, keepdim=True)")),
        ["sequence_truncate_sum_cap2_B6_T16", "sequence_mask_sum_cap2_B6_T16"]),
    # a fresh 0 for a row without kept tokens: when every row is rejected the loss is out of the
    # graph, and backward raises instead of giving a zero gradient
    "rejected_row_a_constant_0": Mistake(
        "uses a fresh constant 0 for a row without kept tokens, so an all-rejected batch has no graph",
        edited(LOOP, ("rows.append(policy_log_probs[b, idx].sum())  # 0, still in the graph",
                                                    "rows.append(torch.zeros((), dtype=policy_log_probs.dtype))")),
        ["all_rejected_sequence_mask_B4_T12"]),
    "always_float32": Mistake(
        "returns a float32 loss whatever the input: float64 log-probs must give float64",
        edited(WHERE, ("loss = rows.mean()", "loss = rows.float().mean()")),
        ["float64_token_mask_cap2_B4_T12", "float64_sequence_truncate_sum_cap2_B4_T12"]),
}
