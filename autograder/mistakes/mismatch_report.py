"""The known mistakes of `mismatch_report` (notebook 15): the catalogue `autograder.mistakes` describes."""

from __future__ import annotations

from autograder.mistakes import Mistake, edited


# the correct version 'boolean_indexing' (tests/graded/test_mismatch_report.py), which the edits start from
INDEXING = """
        import torch
        def mismatch_report(train_log_probs, rollout_log_probs, response_mask):
            if train_log_probs.shape != rollout_log_probs.shape:
                raise ValueError(f"train_log_probs {tuple(train_log_probs.shape)} vs rollout_log_probs {tuple(rollout_log_probs.shape)}")
            if response_mask.shape != train_log_probs.shape:
                raise ValueError(f"response_mask {tuple(response_mask.shape)} vs log-probs {tuple(train_log_probs.shape)}")
            if not ((response_mask == 0) | (response_mask == 1)).all():
                raise ValueError("response_mask must hold 0 and 1 only")
            m = response_mask.bool()
            if not m.any():
                raise ValueError("response_mask is empty")
            diff = train_log_probs - rollout_log_probs
            d = diff[m]
            a = d.abs()
            r = d.exp()
            seq = torch.where(m, diff, torch.zeros_like(diff)).sum(-1)
            return {"mean_diff": d.mean(), "mean_abs": a.mean(), "std_abs": a.std(),
                    "p95_abs": a.quantile(0.95), "max_abs": a.max(),
                    "frac_outside": ((r < 0.9) | (r > 1.1)).to(d.dtype).mean(),
                    "mean_k3": (torch.expm1(d) - d).mean(), "seq_log_ratio": seq,
                    "seq_quantiles": seq[m.any(-1)].quantile(torch.tensor([0.05, 0.5, 0.95], dtype=d.dtype))}
    """

MISTAKES = {
    # every position counted: the prompt's and the padding's garbage in every statistic
    "statistics_over_every_position": Mistake(
        "takes every statistic over every position instead of the response tokens only",
        edited(INDEXING, ("d = diff[m]", "d = diff.flatten()")),
        ["symmetric_tails_float32_B4_T40", "empty_rows_float32_B6_T20"]),
    "p95_and_max_of_the_signed_difference": Mistake(
        "takes p95_abs and max_abs of the signed difference instead of its absolute value",
        edited(INDEXING, ('"p95_abs": a.quantile(0.95), "max_abs": a.max()',
                                                                   '"p95_abs": d.quantile(0.95), "max_abs": d.max()')),
        ["largest_is_negative_float32_B3_T24", "B16_T128_float32"]),
    # r = pi_rollout / pi_train: the k3 of KL(train || rollout), which the rollout's samples do not estimate
    "k3_ratio_inverted": Mistake(
        "computes k3 with r = pi_rollout / pi_train instead of pi_train / pi_rollout",
        edited(INDEXING, ("(torch.expm1(d) - d).mean()", "(torch.expm1(-d) + d).mean()")),
        ["skewed_positive_float32_B4_T32", "symmetric_tails_float32_B4_T40"]),
    "biased_std": Mistake(
        "takes the biased std (unbiased=False) instead of torch's default unbiased std",
        edited(INDEXING, ('"std_abs": a.std()', '"std_abs": a.std(unbiased=False)')),
        ["symmetric_tails_float32_B4_T40", "B16_T128_float32"]),
    # exp(d) - 1 - d in float32 loses k3 (about d^2 / 2) to the rounding of exp near 1
    "k3_without_expm1": Mistake(
        "computes k3 as r - 1 - d instead of expm1(d) - d, which loses the small k3 near r = 1 in float32",
        edited(INDEXING, ("(torch.expm1(d) - d).mean()", "(r - 1 - d).mean()")),
        ["tiny_mismatch_float32_B4_T40"]),
    # diff * mask: right where the masked positions hold finite numbers, NaN where one holds NaN or inf
    "masked_by_multiplication": Mistake(
        "zeroes the positions off the mask by multiplying with the mask, so a NaN or inf there makes the row's sum NaN "
        "(0 * inf is NaN)",
        edited(INDEXING, ("seq = torch.where(m, diff, torch.zeros_like(diff)).sum(-1)", "seq = (diff * m).sum(-1)")),
        ["nan_and_inf_under_the_mask_float32_B4_T24"]),
    # an empty row's 0 among the sequences
    "quantiles_over_every_row": Mistake(
        "takes the sequence quantiles over every row, an empty row's 0 included",
        edited(INDEXING, ("seq[m.any(-1)].quantile", "seq.quantile")),
        ["empty_rows_float32_B6_T20", "T1_B6"]),
    # |d| > 0.1 for the band: log 0.9 = -0.105 and log 1.1 = 0.095 are not symmetric
    "band_from_abs_log_ratio": Mistake(
        "counts |log r| > 0.1 as outside the band, though the band is r outside [0.9, 1.1] (not symmetric in log r)",
        edited(INDEXING, ("((r < 0.9) | (r > 1.1))", "(a > 0.1)")),
        ["band_edges_float32_B3_T16"]),
    # a long or float mask indexes rows (or raises) instead of selecting tokens
    "mask_not_made_bool": Mistake(
        "uses a long or float mask as it is instead of as a boolean mask",
        edited(INDEXING, ("m = response_mask.bool()", "m = response_mask")),
        ["long_mask_B4_T30", "float_mask_B4_T30"]),
    # the mask's values never checked: a 2 is read as a response token
    "mask_values_not_checked": Mistake(
        "accepts a mask holding values other than 0 and 1 instead of raising ValueError",
        edited(INDEXING, ('''            if not ((response_mask == 0) | (response_mask == 1)).all():
                raise ValueError("response_mask must hold 0 and 1 only")
''', "")),
        ["error_mask_holds_a_2_3x8"]),
    # the mask's shape never checked: boolean indexing raises an IndexError, not a ValueError
    "mask_shape_not_checked": Mistake(
        "never checks the mask's shape, so a mismatch raises IndexError instead of ValueError",
        edited(INDEXING, ('''            if response_mask.shape != train_log_probs.shape:
                raise ValueError(f"response_mask {tuple(response_mask.shape)} vs log-probs {tuple(train_log_probs.shape)}")
''', "")),
        ["error_mask_shape_differs_3x8_3x9"]),
    # no check of the empty mask: torch.quantile of nothing raises a RuntimeError, not a ValueError
    "empty_mask_not_checked": Mistake(
        "never checks for an empty mask, so it raises RuntimeError instead of ValueError",
        edited(INDEXING, ('raise ValueError("response_mask is empty")', "pass")),
        ["error_empty_mask_3x8"]),
    "shapes_not_checked": Mistake(
        "prints a message for log-probs of different shapes instead of raising ValueError",
        edited(INDEXING, ("raise ValueError(f\"train_log_probs {", "print(f\"train_log_probs {")),
        ["error_shapes_differ_3x8_3x9"]),
    "always_float32": Mistake(
        "computes in float32 always: float64 log-probs must give float64 statistics",
        edited(INDEXING, ("diff = train_log_probs - rollout_log_probs", "diff = (train_log_probs - rollout_log_probs).float()")),
        ["float64_B5_T24", "float64_float_mask_B3_T16"]),
}
