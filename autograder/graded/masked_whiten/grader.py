"""The grader's side of `masked_whiten` (notebook 11): how its hidden cases are drawn, the correct
versions that must earn full marks and the known mistakes that must lose them, each with the
sentence a student reads (`autograder.mistakes`). Never in a student kit or the grading sandbox,
which hold the folder's __init__.py only.

Hidden cases of `masked_whiten(values, mask, shift_mean=True) -> Tensor`: (x - mean) /
sqrt(var + 1e-8) with the mean and the unbiased variance (divided by n - 1) of the entries where
the mask is 1, the mean added back for shift_mean=False, 0 where the mask is 0; on 1-d, 2-d and
3-d shapes, bool / long / int / float masks, float32 and float64. Every case keeps at least two
entries (fewer is a ValueError, not graded here) and drops at least one (except `all_one_mask_*`).

Outputs: the whitened tensor and whether the caller's `values` were left unchanged. No gradient:
whitening is applied to advantages, which are data (computed under no_grad); a version that takes
the mean or the variance as a Python number (`.item()`) is correct for that contract.

Every case's values have a mean far from 0 (about 1 to 3 in spread units), so that adding the
mean back or not is always visible.

What the cases are built to catch:

- `masked_out_garbage_1e4_*` (finite values of magnitude 1e3 to 1e4 where the mask is 0), and
  every case with a dropped entry: a mean or a variance (std) over every entry instead of the
  masked ones, the masked-out entries left unzeroed (they get whitened garbage);
- `three_entries_*`, `two_entries_*` (n = 3 and n = 2: the unbiased variance is 1.5 and 2 times
  the biased one) and every other case: the biased variance (divided by n), torch.var's default
  taken for a biased one or the other way round;
- `*_shift_mean_false_*`: shift_mean ignored (the mean never added back); every shift_mean=True
  case and `default_shift_mean_*` (the argument left out: True): shift_mean inverted;
- `constant_under_mask_*` (every masked entry the same dyadic number, so the mean is exact and
  the variance exactly 0): the 1e-8 left out (0 / 0 = NaN), a guard that returns the values
  themselves (or 1s) when the variance is 0; with shift_mean=False the output is the constant;
- `tiny_spread_var_1e-8_*` (a variance of about 1e-8, the size of the eps): the eps left out
  (outputs about 1.4 times too large) or put outside the square root (std + 1e-8);
- `offset_1e3_spread_1_float32_*` (16 kept entries of about 1e3 + N(0, 1), on a grid of 2^-8 so
  that the kept entries, their sum and their mean are exact in float32 and every two-pass
  computation is accurate to a few units of rounding): the one-pass variance E[x^2] - E[x]^2,
  which cancels 1e6 against 1e6 in float32 (an error of several percent);
- `long_mask_*`, `int_mask_*`, `float_mask_*`: `values[mask]` with a mask that is not bool (it
  indexes rows instead of selecting entries, or raises);
- `float64_*`: float64 computed (or returned) in float32;
- `values_unchanged` in every case: an in-place edit of the caller's tensor (`values[~mask] = 0`,
  `values -= mean`);
- the shapes (`vector_1d_*`, `3d_*`, `B8_T128_*`): statistics per row or per dim instead of over
  every masked entry of the tensor, a reshape that loses the input's shape.
"""

from __future__ import annotations

import torch

from autograder.mistakes import edited, Mistake


# ---------------------------------------------------------------- the hidden cases
def make_inputs(gen: torch.Generator) -> list[tuple[str, dict]]:
    def values(*shape, mean=None, spread=1.0):
        """float64 values of a mean away from 0 (1 to 3 spreads, of a random sign) and the given spread."""
        if mean is None:
            sign = 1.0 if float(torch.rand((), generator=gen)) < 0.5 else -1.0
            mean = sign * spread * (1.0 + 2.0 * float(torch.rand((), generator=gen)))
        return mean + spread * torch.randn(*shape, generator=gen, dtype=torch.float64)

    def mask(*shape, p=0.6):
        """Random, at least two kept entries and at least one dropped."""
        m = torch.rand(*shape, generator=gen) < p
        flat = m.view(-1)
        flat[0] = flat[-2] = True
        flat[-1] = False
        return m

    def garbage(x, m):
        """Finite values of magnitude 1e3 to 1e4, of either sign, where the mask is 0."""
        x = x.clone()
        n = int((~m).sum())
        size = 1e3 + 9e3 * torch.rand(n, generator=gen, dtype=torch.float64)
        sign = torch.where(torch.rand(n, generator=gen) < 0.5, -1.0, 1.0).double()
        x[~m] = sign * size
        return x

    def exact_count(m, n):
        """`m` with exactly n kept entries (the first n of a random order)."""
        order = torch.randperm(m.numel(), generator=gen)
        out = torch.zeros(m.numel(), dtype=torch.bool)
        out[order[:n]] = True
        return out.view(m.shape)

    def case(x, m, shift_mean=True, dtype=torch.float32, mask_kind="bool"):
        mk = {"bool": m, "long": m.long(), "int": m.int(), "float": m.to(dtype)}[mask_kind]
        return {"values": x.to(dtype), "mask": mk, "shift_mean": shift_mean}

    # garbage where the mask is 0
    g1_m = mask(4, 10)
    g1 = garbage(values(4, 10), g1_m)
    g2_m = mask(3, 12)
    g2 = garbage(values(3, 12), g2_m)
    # exactly 3 and 2 kept entries
    three_m = exact_count(torch.zeros(2, 5), 3)
    two_m = exact_count(torch.zeros(3, 4), 2)
    # the same dyadic constant c = k / 4 (|k| from 4 to 40) on every kept entry: sum and mean exact
    def constant(*shape):
        m = mask(*shape)
        k = int(torch.randint(4, 41, (), generator=gen)) * (1 if float(torch.rand((), generator=gen)) < 0.5 else -1)
        x = garbage(values(*shape), m)
        x[m] = k / 4
        return x, m
    c1, c1_m = constant(3, 7)
    c2, c2_m = constant(2, 3, 4)
    c3, c3_m = constant(4, 5)
    # 1e3 + N(0, 1) on a grid of 2^-8, 16 kept entries: every partial sum < 2^24 * 2^-8, exact in float32
    off_m = exact_count(torch.zeros(4, 6), 16)
    off = torch.round(values(4, 6, mean=1e3, spread=1.0) * 256) / 256
    off[~off_m] = torch.round(torch.randn(int((~off_m).sum()), generator=gen, dtype=torch.float64) * 256) / 256
    # a variance of about 1e-8 (spread 1e-4): the eps is half of var + eps
    tiny_m = mask(3, 8)
    return [
        ("vector_1d_n13", case(values(13), mask(13))),
        ("2d_bool_mask_B4_T9", case(values(4, 9), mask(4, 9))),
        ("2d_shift_mean_false_B4_T9", case(values(4, 9), mask(4, 9), shift_mean=False)),
        ("default_shift_mean_B3_T7", case(values(3, 7), mask(3, 7), shift_mean="default")),
        ("3d_long_mask_2x3x5", case(values(2, 3, 5), mask(2, 3, 5), mask_kind="long")),
        ("3d_long_mask_shift_mean_false_2x3x5", case(values(2, 3, 5), mask(2, 3, 5), shift_mean=False,
                                                     mask_kind="long")),
        ("int_mask_B3_T6", case(values(3, 6), mask(3, 6), mask_kind="int")),
        ("float_mask_B3_T8", case(values(3, 8), mask(3, 8), mask_kind="float")),
        ("float_mask_shift_mean_false_B3_T8", case(values(3, 8), mask(3, 8), shift_mean=False, mask_kind="float")),
        ("masked_out_garbage_1e4_B4_T10", case(g1, g1_m)),
        ("masked_out_garbage_1e4_shift_mean_false_B3_T12", case(g2, g2_m, shift_mean=False)),
        ("three_entries_B2_T5", case(values(2, 5), three_m)),
        ("two_entries_B3_T4", case(values(3, 4), two_m)),
        ("constant_under_mask_B3_T7", case(c1, c1_m)),
        ("constant_under_mask_shift_mean_false_2x3x4", case(c2, c2_m, shift_mean=False)),
        ("constant_under_mask_float64_B4_T5", case(c3, c3_m, dtype=torch.float64)),
        ("tiny_spread_var_1e-8_B3_T8", case(values(3, 8, spread=1e-4), tiny_m)),
        ("offset_1e3_spread_1_float32_B4_T6", case(off, off_m)),
        ("all_one_mask_B3_T5", case(values(3, 5), torch.ones(3, 5, dtype=torch.bool))),
        ("float64_B4_T6", case(values(4, 6), mask(4, 6), dtype=torch.float64)),
        ("float64_shift_mean_false_float_mask_2x3x4", case(values(2, 3, 4), mask(2, 3, 4), shift_mean=False,
                                                           dtype=torch.float64, mask_kind="float")),
        ("B8_T128_p0.3", case(values(8, 128), mask(8, 128, p=0.3))),
    ]


# ---------------------------------------------------------------- the correct versions
# the correct version 'where_two_pass' (autograder/graded/masked_whiten/test_masked_whiten.py), which the edits start from
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


CORRECT = {
    "where_two_pass": BASE,
    # the kept entries selected, torch.var_mean (unbiased by default), written back into zeros
    "boolean_indexing_torch_var": """
        import torch
        def masked_whiten(values, mask, shift_mean=True):
            keep = mask != 0
            kept = values[keep]
            if kept.numel() < 2:
                raise ValueError("mask must keep at least 2 entries")
            var, mean = torch.var_mean(kept)
            whitened = (kept - mean) * torch.rsqrt(var + 1e-8)
            if not shift_mean:
                whitened += mean
            out = torch.zeros_like(values)
            out[keep] = whitened
            return out
    """,
    # multiplied by a float mask: harmless here, the masked-out values are finite
    "float_mask_multiplication": """
        import torch
        def masked_whiten(values, mask, shift_mean=True):
            m = mask.to(values.dtype)
            n = m.sum()
            mean = (values * m).sum() / n
            var = (((values - mean) * m) ** 2).sum() / (n - 1)
            whitened = (values - mean) / (var + 1e-8) ** 0.5
            if shift_mean is False:
                whitened = whitened + mean
            return whitened * m
    """,
    "float64_inside": """
        import torch
        def masked_whiten(values, mask, shift_mean=True):
            keep = mask.bool()
            x = values.double()
            n = int(keep.sum())
            mean = x[keep].sum() / n
            var = ((x[keep] - mean) ** 2).sum() / (n - 1)
            out = (x - mean) / torch.sqrt(var + 1e-8)
            if not shift_mean:
                out += mean
            return out.masked_fill(~keep, 0.0).to(values.dtype)
    """,
    # statistics as Python numbers, accumulated row by row (float64), then one vectorised pass
    "python_numbers_loop_over_rows": """
        import math
        import torch
        def masked_whiten(values, mask, shift_mean=True):
            rows = values.reshape(-1, values.shape[-1]) if values.dim() > 0 else values.reshape(1, -1)
            keeps = mask.bool().reshape(rows.shape)
            total, count = 0.0, 0
            for row, keep in zip(rows, keeps):
                total += float(row[keep].double().sum())
                count += int(keep.sum())
            if count < 2:
                raise ValueError("fewer than 2 masked entries")
            mean = total / count
            squares = 0.0
            for row, keep in zip(rows, keeps):
                squares += float(((row[keep].double() - mean) ** 2).sum())
            scale = 1.0 / math.sqrt(squares / (count - 1) + 1e-8)
            out = (values.double() - mean) * scale + (0.0 if shift_mean else mean)
            return torch.where(mask.bool(), out, 0.0).to(values.dtype)
    """,
}


# ---------------------------------------------------------------- the known mistakes
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
