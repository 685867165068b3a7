"""Hidden cases of `masked_whiten(values, mask, shift_mean=True) -> Tensor`: (x - mean) /
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

GRADED = "masked_whiten"


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


def call(fn, inputs: dict) -> dict:
    values = inputs["values"].clone()
    before = values.clone()
    mask = inputs["mask"].clone()
    if inputs["shift_mean"] == "default":
        out = fn(values, mask)
    else:
        out = fn(values, mask, shift_mean=inputs["shift_mean"])
    return {"whitened": out, "values_unchanged": bool(torch.equal(values, before))}
