"""The known mistakes of `importance_weights` (notebook 15): the catalogue `autograder.mistakes` describes."""

from __future__ import annotations

from autograder.mistakes import Mistake, edited


CHECKS = """
            if mode not in ("token_truncate", "token_mask", "sequence_truncate", "sequence_mask"):
                raise ValueError(f"unknown mode {mode}")
            if aggregate not in ("sum", "mean"):
                raise ValueError(f"unknown aggregate {aggregate}")
            if cap <= 0:
                raise ValueError("cap must be positive")
            if train_log_probs.shape != rollout_log_probs.shape or response_mask.shape != train_log_probs.shape:
                raise ValueError("train_log_probs, rollout_log_probs and response_mask must have one shape")
"""

# the correct version 'where_under_no_grad' (tests/graded/test_importance_weights.py), which the edits start from
WHERE = """
        import torch
        def importance_weights(train_log_probs, rollout_log_probs, response_mask, mode, cap, aggregate="sum"):
""" + CHECKS + """
            with torch.no_grad():
                m = response_mask.bool()
                log_r = torch.where(m, train_log_probs - rollout_log_probs, torch.zeros_like(train_log_probs))
                if mode.startswith("sequence"):
                    total = log_r.sum(dim=1, keepdim=True)
                    if aggregate == "mean":
                        total = total / m.sum(dim=1, keepdim=True).clamp(min=1)
                    log_r = total.expand_as(log_r)
                r = torch.exp(log_r)
                if mode.endswith("truncate"):
                    w = torch.clamp(r, max=cap)
                else:
                    w = torch.where(r <= cap, r, torch.zeros_like(r))
                return torch.where(m, w, torch.zeros_like(w))
    """

# the correct version 'boolean_indexing_float64' (tests/graded/test_importance_weights.py), which edits start from
BOOLEAN_INDEXING_FLOAT64 = """
        import torch
        def importance_weights(train_log_probs, rollout_log_probs, response_mask, mode, cap, aggregate="sum"):
""" + CHECKS + """
            m = response_mask.bool()
            diff = train_log_probs.detach().double() - rollout_log_probs.detach().double()
            B, T = diff.shape
            out = torch.zeros(B, T, dtype=torch.float64)
            if mode.startswith("token"):
                log_r = diff[m]
            else:
                rows = torch.arange(B)[:, None].expand(B, T)[m]
                sums = torch.zeros(B, dtype=torch.float64).index_add(0, rows, diff[m])
                if aggregate == "mean":
                    sums = sums / m.sum(1).clamp(min=1)
                log_r = sums[rows]
            r = log_r.exp()
            out[m] = r.clamp(max=cap) if mode.endswith("truncate") else r * (r <= cap)
            return out.to(train_log_probs.dtype)
    """

MISTAKES = {
    "ratio_inverted": Mistake(
        "computes the ratio as exp(rollout - train) instead of exp(train - rollout)",
        edited(WHERE, ("train_log_probs - rollout_log_probs", "rollout_log_probs - train_log_probs")),
        ["token_truncate_cap2_float32_B4_T24", "sequence_mask_sum_cap2_B6_T24"]),
    "sequence_ratio_from_the_mean_always": Mistake(
        'aggregates a sequence\'s log-ratio with the mean even when aggregate is "sum"',
        edited(WHERE, ('if aggregate == "mean":\n', "if True:\n")),
        ["sequence_truncate_sum_cap2_B6_T24", "sequence_mask_sum_cap2_B6_T24",
         "sequence_mask_default_aggregate_cap3_B6_T20"]),
    "sequence_ratio_from_the_sum_always": Mistake(
        'aggregates a sequence\'s log-ratio with the sum even when aggregate is "mean"',
        edited(WHERE, ('if aggregate == "mean":\n', "if False:\n")),
        ["sequence_truncate_mean_cap1.5_B6_T24", "sequence_mask_mean_cap2_B6_T24"]),
    # the mean over the row's width T: the padding and the prompt counted as tokens of log-ratio 0
    "mean_over_the_width": Mistake(
        "averages a sequence's log-ratio over the row's width T instead of its response tokens",
        edited(WHERE, ("total = total / m.sum(dim=1, keepdim=True).clamp(min=1)",
                                               "total = total / m.shape[1]")),
        ["sequence_truncate_mean_cap1.5_B6_T24", "sequence_mask_mean_cap2_B6_T24"]),
    "mask_mode_zeroes_the_ratios_below_cap": Mistake(
        "in a mask mode, keeps the ratios at or above the cap and zeroes the others, the wrong way round",
        edited(WHERE, ("w = torch.where(r <= cap, r, torch.zeros_like(r))",
                                                                 "w = torch.where(r >= cap, r, torch.zeros_like(r))")),
        ["token_mask_cap2_float32_B4_T24", "sequence_mask_sum_cap2_B6_T24"]),
    # truncation both ways, as a symmetric clip
    "truncation_with_a_lower_bound": Mistake(
        "truncates from below too (clamp to [1 / cap, cap]) where only the upper truncation is asked",
        edited(WHERE, ("w = torch.clamp(r, max=cap)", "w = torch.clamp(r, min=1 / cap, max=cap)")),
        ["token_truncate_cap2_float32_B4_T24", "token_truncate_cap1.5_long_mask_B4_T20"]),
    "not_zero_off_the_mask": Mistake(
        "leaves weights on positions off the mask instead of 0",
        edited(WHERE, ("return torch.where(m, w, torch.zeros_like(w))", "return w")),
        ["token_truncate_cap2_float32_B4_T24", "empty_rows_token_truncate_cap2_B5_T16"]),
    # the row's sum over every position: the prompt's and the padding's garbage in it
    "sequence_sum_over_every_position": Mistake(
        "sums a sequence's log-ratio over every position instead of the response tokens only",
        edited(WHERE, ("total = log_r.sum(dim=1, keepdim=True)",
                                                            "total = (train_log_probs - rollout_log_probs).sum(dim=1, keepdim=True)")),
        ["sequence_truncate_sum_cap2_B6_T24", "sequence_mask_sum_cap2_B6_T24"]),
    # r * (r <= cap): inf * 0 = NaN where the sum overflows exp
    "mask_mode_as_a_product": Mistake(
        "writes the mask mode as r * (r <= cap), which is inf * 0 = NaN where exp overflows",
        edited(WHERE, ("w = torch.where(r <= cap, r, torch.zeros_like(r))", "w = r * (r <= cap)")),
        ["overflow_sequence_mask_sum_cap2_B4_T20"]),
    "not_detached": Mistake(
        "returns weights still attached to the graph instead of detached ones",
        edited(WHERE, ("with torch.no_grad():", "if True:")),
        ["token_truncate_cap2_float32_B4_T24", "sequence_mask_sum_cap2_B6_T24"]),
    "mask_not_made_bool": Mistake(
        "uses a long or float mask as it is instead of as a boolean mask",
        edited(BOOLEAN_INDEXING_FLOAT64, ("m = response_mask.bool()", "m = response_mask")),
        ["token_truncate_cap1.5_long_mask_B4_T20", "token_mask_cap3_float_mask_B4_T20"]),
    "always_float32": Mistake(
        "computes the weights in float32 always: float64 log-probs must give float64",
        edited(WHERE, ("r = torch.exp(log_r)", "r = torch.exp(log_r.float())")),
        ["float64_token_mask_cap5_B4_T16", "float64_sequence_truncate_sum_cap2_long_mask_B4_T16"]),
    "cap_not_checked": Mistake(
        "accepts a cap <= 0 instead of raising ValueError",
        edited(WHERE, ('raise ValueError("cap must be positive")', "pass")),
        ["error_cap_0", "error_cap_negative"]),
}
