"""The known mistakes of `corrected_grpo_loss` (notebook 15): the catalogue `autograder.mistakes` describes."""

from __future__ import annotations

from autograder.mistakes import Mistake, edited


# the correct version 'where_and_row_counts' (tests/graded/test_corrected_grpo_loss.py), which the edits start from
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

# the correct version 'loop_over_rows_boolean_indexing' (tests/graded/test_corrected_grpo_loss.py), which the edits start from
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
