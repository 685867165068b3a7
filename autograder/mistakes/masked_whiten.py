"""The known mistakes of `masked_whiten` (notebook 11): the catalogue `autograder.mistakes` describes."""

from __future__ import annotations

from autograder.mistakes import Mistake, edited


# the correct version 'where_two_pass' (tests/graded/test_masked_whiten.py), which the edits start from
BASE = """
        import torch
        def masked_whiten(values, mask, shift_mean=True):
            keep = mask.bool()
            n = keep.sum()
            if n < 2:
                raise ValueError("need at least 2 masked entries")
            mean = torch.where(keep, values, torch.zeros_like(values)).sum() / n
            centred = torch.where(keep, values - mean, torch.zeros_like(values))
            var = (centred ** 2).sum() / (n - 1)
            out = centred / torch.sqrt(var + 1e-8)
            if not shift_mean:
                out = out + mean
            return torch.where(keep, out, torch.zeros_like(out))
    """

MEAN = "mean = torch.where(keep, values, torch.zeros_like(values)).sum() / n"

VAR = "var = (centred ** 2).sum() / (n - 1)"

OUT = "out = centred / torch.sqrt(var + 1e-8)"

SHIFT = "if not shift_mean:"

ZERO = "return torch.where(keep, out, torch.zeros_like(out))"

MISTAKES = {
    # the mean of every entry, garbage included
    "mean_over_all_entries": Mistake(
        "takes the mean of every entry, masked-out ones included, instead of the masked entries only",
        edited(BASE, (MEAN, "mean = values.mean()")),
        ["masked_out_garbage_1e4_B4_T10", "2d_bool_mask_B4_T9", "vector_1d_n13"]),
    # the variance of every entry: the padding's values in the scale
    "variance_over_all_entries": Mistake(
        "takes the variance of every entry, masked-out ones included, instead of the masked entries only",
        edited(BASE, (VAR, "var = values.var()")),
        ["masked_out_garbage_1e4_B4_T10", "2d_bool_mask_B4_T9"]),
    # divided by n: the biased variance
    "biased_variance": Mistake(
        "divides the variance by n instead of n - 1 (the biased variance)",
        edited(BASE, (VAR, "var = (centred ** 2).sum() / n")),
        ["three_entries_B2_T5", "two_entries_B3_T4", "2d_bool_mask_B4_T9"]),
    "shift_mean_ignored": Mistake(
        "never adds the mean back when shift_mean is False",
        edited(BASE, (SHIFT, "if False:")),
        ["2d_shift_mean_false_B4_T9", "float_mask_shift_mean_false_B3_T8",
         "constant_under_mask_shift_mean_false_2x3x4"]),
    # the mean added back when shift_mean is True
    "shift_mean_inverted": Mistake(
        "adds the mean back when shift_mean is True instead of when it is False",
        edited(BASE, (SHIFT, "if shift_mean:")),
        ["2d_bool_mask_B4_T9", "default_shift_mean_B3_T7", "masked_out_garbage_1e4_B4_T10"]),
    # the masked-out entries get whitened garbage instead of 0
    "masked_entries_not_zeroed": Mistake(
        "gives the masked-out entries whitened values instead of 0",
        edited(BASE, (OUT, "out = (values - mean) / torch.sqrt(var + 1e-8)"),
                                             (ZERO, "return out")),
        ["2d_bool_mask_B4_T9", "masked_out_garbage_1e4_B4_T10"]),
    # the mean added back after the zeroing: the masked-out entries hold the mean
    "mean_added_to_the_masked_out_entries": Mistake(
        "adds the mean back after zeroing, so the masked-out entries hold the mean instead of 0",
        edited(BASE, (SHIFT, "if False:"), (
            ZERO, "out = torch.where(keep, out, torch.zeros_like(out))\n"
                  "            return out if shift_mean else out + mean")),
        ["2d_shift_mean_false_B4_T9", "masked_out_garbage_1e4_shift_mean_false_B3_T12"]),
    # no eps: 0 / 0 = NaN on constant values, 1.4 times too large at a variance of 1e-8
    "eps_left_out": Mistake(
        "divides by sqrt(var) without the 1e-8: NaN for constant values, too large for a tiny variance",
        edited(BASE, (OUT, "out = centred / torch.sqrt(var)")),
        ["constant_under_mask_B3_T7", "constant_under_mask_float64_B4_T5", "tiny_spread_var_1e-8_B3_T8"]),
    # std + eps, not sqrt(var + eps)
    "eps_outside_the_square_root": Mistake(
        "divides by sqrt(var) + eps instead of sqrt(var + eps)",
        edited(BASE, (OUT, "out = centred / (torch.sqrt(var) + 1e-8)")),
        ["tiny_spread_var_1e-8_B3_T8"]),
    # E[x^2] - E[x]^2: 1e6 - 1e6 in float32 for values about 1e3
    "one_pass_variance": Mistake(
        "computes the variance as E[x^2] - E[x]^2, which cancels catastrophically for values far from 0 in float32",
        edited(BASE, (VAR, "var = (torch.where(keep, values, torch.zeros_like(values)) ** 2).sum() "
                                                 "/ n * n / (n - 1) - mean ** 2 * n / (n - 1)")),
        ["offset_1e3_spread_1_float32_B4_T6"]),
    # each row whitened on its own statistics
    "per_row_statistics": Mistake(
        "whitens each row on its own statistics instead of on the statistics of every masked entry",
        """
        import torch
        def masked_whiten(values, mask, shift_mean=True):
            keep = mask.bool()
            n = keep.sum(-1, keepdim=True)
            mean = torch.where(keep, values, 0.0).sum(-1, keepdim=True) / n
            var = torch.where(keep, (values - mean) ** 2, 0.0).sum(-1, keepdim=True) / (n - 1)
            out = (values - mean) / torch.sqrt(var + 1e-8)
            if not shift_mean:
                out = out + mean
            return torch.where(keep, out, 0.0)
    """,
        ["2d_bool_mask_B4_T9", "3d_long_mask_2x3x5"]),
    # values[mask] with a long or int mask indexes rows, with a float mask it raises
    "indexes_with_the_mask_as_given": Mistake(
        "indexes with the mask as given: a long or int mask indexes rows, a float mask raises",
        """
        import torch
        def masked_whiten(values, mask, shift_mean=True):
            kept = values[mask]
            mean, var = kept.mean(), kept.var()
            out = (values - mean) / torch.sqrt(var + 1e-8)
            if not shift_mean:
                out = out + mean
            return torch.where(mask.bool(), out, 0.0)
    """,
        ["3d_long_mask_2x3x5", "int_mask_B3_T6", "float_mask_B3_T8"]),
    # the caller's padding zeroed in place before the statistics
    "zeroes_the_callers_values_in_place": Mistake(
        "zeroes the caller's masked-out values in place",
        edited(BASE, (
            MEAN, "values[~keep] = 0\n            mean = values.sum() / n")),
        ["2d_bool_mask_B4_T9", "masked_out_garbage_1e4_B4_T10"]),
    "always_float32": Mistake(
        "computes in float32 always: float64 values must give float64",
        edited(BASE, ("keep = mask.bool()", "keep = mask.bool()\n            values = values.float()")),
        ["float64_B4_T6", "constant_under_mask_float64_B4_T5"]),
}
