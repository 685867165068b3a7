"""The grader's side of `mismatch_report` (notebook 15): how its hidden cases are drawn, the correct
versions that must earn full marks and the known mistakes that must lose them, each with the
sentence a student reads (`autograder.mistakes`). Never in a student kit or the grading sandbox,
which hold the folder's __init__.py only.

Hidden cases of `mismatch_report(train_log_probs, rollout_log_probs, response_mask) -> dict`
(notebook 15): statistics of d = train - rollout over the response tokens (mean_diff, mean_abs,
std_abs, p95_abs, max_abs, frac_outside, mean_k3), the (B,) per-row sums of d and their
(0.05, 0.5, 0.95) quantiles over the rows that have a response token.

Every mask is one contiguous response per row (prompt, response, padding); d is what two
engines show: most tokens N(0, 0.03^2), a fifth of magnitude 0.1 to 1.5, either sign (so that
the signed mean is near 0 while the mismatch is not). Where the mask is 0 both log-probs hold
independent garbage of magnitude 5 to 50, and in `nan_and_inf_under_the_mask_*` NaN, inf and -inf
(every row has such a position). No d is within 1e-4 of log 0.9 or log 1.1, so that
no ratio's side of the [0.9, 1.1] band is decided by rounding. Float32 and float64; bool, long
and float masks. Error cases must raise ValueError: their output is {"raises": "ValueError"},
{"raises": "other"} (another exception) or {"raises": None}.

Outputs: the nine statistics (each key of the report) and whether the caller's tensors were
left unchanged. No gradient: the report is a diagnostic.

What the cases are built to catch:

- every case (garbage outside the mask): statistics over every position, or the mask applied
  by multiplication to the ratios (the garbage's exp overflows: inf * 0 = NaN);
- `nan_and_inf_under_the_mask_*`: the mask applied by multiplication anywhere, even to d itself
  (NaN * 0 and inf * 0 are NaN: every row's sum of d becomes NaN);
- every case: |d| statistics taken on d (p95 and max signed; `largest_is_negative_*` puts the
  largest |d| on a negative d), the biased std (n instead of n - 1), the ratio inverted in k3
  (r = exp(-d): the k3 of the other direction, which `skewed_positive_*` shows most);
- `tiny_mismatch_float32_*` (|d| about 1e-5, log-probs in one binade): k3 as exp(d) - 1 - d in
  float32, which loses its whole value (about d^2 / 2) to the rounding of exp near 1;
- `band_edges_*` (d from -0.12 to 0.12): the band taken as |d| > 0.1 (log 0.9 = -0.105 and
  log 1.1 = 0.095 are not symmetric);
- `empty_rows_*`, `T1_*` (rows without a response token): the sequence quantiles over every
  row (an empty row's 0 among them), a per-row sum that is not 0 there;
- `B1_*` (one row: the three quantiles are its sum), `all_one_mask_*`, `B16_T128_*`: shapes;
- `long_mask_*`, `float_mask_*`: `d[response_mask]` with a mask that is not bool (it indexes
  rows, or raises); `float64_*`: float64 computed or returned in float32;
- `error_shapes_differ_*`, `error_empty_mask_*`, `error_mask_shape_differs_*`,
  `error_mask_holds_a_2_*`: the errors of the contract (a mask that does not align with the
  log-probs, or holds anything but 0 and 1, is a ValueError, not an IndexError or a report).
"""

from __future__ import annotations

import math
import torch

from autograder.graded._response_mask_cases import MaskDraw
from autograder.mistakes import edited, Mistake


# ---------------------------------------------------------------- the hidden cases
# each error case and the phrase of the reference's `Raises:` section that states it (tests/test_contracts.py)
RAISES = {
    "error_shapes_differ_3x8_3x9": "log-probs of two shapes",
    "error_empty_mask_3x8": "a mask without a response token",
    "error_mask_shape_differs_3x8_3x9": "a response_mask of another shape than the log-probs",
    "error_mask_holds_a_2_3x8": "a mask that holds anything but 0 and 1",
}
# grader-only: the signed sums one unit of rounding of their terms' scale apart (the signed mean
# cancels to near 0 by design; in float64, where the reference is its own truth, too)
VARIANTS = ["autograder.graded.mismatch_report.grader:variant_split_sums_one_ulp_apart"]


def make_inputs(gen: torch.Generator) -> list[tuple[str, dict]]:

    d = MaskDraw(gen)
    bounds = (math.log(0.9), math.log(1.1))

    def case(spans, T, dtype=torch.float32, mask_kind="bool", diffs=None, one_binade=False, non_finite=False, **draw):
        m = d.mask_of(T, spans)
        x = d.away_from(d.log_ratios(len(spans), T, **draw) if diffs is None else diffs, bounds, 1e-4)
        train, rollout = d.log_prob_pair(x, m, level=0.5 if one_binade else 6.0)
        if non_finite:
            # NaN, inf or -inf in the train log-prob of every position off the mask (so that d is NaN or
            # +-inf there whatever the rollout's holds), and in half of the rollout's
            special = torch.tensor([math.nan, math.inf, -math.inf], dtype=torch.float64)
            pick = lambda: special[torch.randint(0, 3, train.shape, generator=gen)]  # noqa: E731
            train = torch.where(m, train, pick())
            rollout = torch.where(m | (torch.rand(train.shape, generator=gen) < 0.5), rollout, pick())
        if one_binade:
            # every log-prob in [-1.75, -1.25], so each float32 d is a multiple of the ulp of 1 and exp(d)
            # rounds to exactly 1 + d: a k3 of exp(d) - 1 - d is then 0 on every token, on every draw
            train, rollout = train - 1.25, rollout - 1.25
        mk = {"bool": m, "long": m.long(), "float": m.to(dtype)}[mask_kind]
        return {"train_log_probs": train.to(dtype), "rollout_log_probs": rollout.to(dtype), "response_mask": mk,
                "expect_error": False}

    def error(train_shape, rollout_shape, mask):
        return {"train_log_probs": -torch.rand(*train_shape, generator=gen),
                "rollout_log_probs": -torch.rand(*rollout_shape, generator=gen), "response_mask": mask,
                "expect_error": True}

    skewed = d.log_ratios(4, 32).abs() * torch.where(torch.rand(4, 32, generator=gen) < 0.85, 1.0, -1.0).double()
    negative = d.log_ratios(3, 24)
    negative_spans = d.spans(3, 24, lengths=(6, None))
    negative[1, negative_spans[1][0] + 2] = -(2.5 + torch.rand((), generator=gen, dtype=torch.float64))
    edge_spans = d.spans(3, 16, lengths=(8, None))
    edges = -0.12 + 0.24 * torch.rand(3, 16, generator=gen, dtype=torch.float64)
    # no drawn d between log 0.9 and -0.1 (inside the band, |d| > 0.1): such tokens would cancel the
    # planted ones below in the count of a |d| > 0.1 band
    edges = torch.where((edges > bounds[0] - 1e-3) & (edges < -0.1), edges - 0.01, edges)
    for b, (start, _) in enumerate(edge_spans):
        # two ratios above 1.1 with |d| < 0.1 and one above 0.9 with |d| > 0.1: not as many of each, or the
        # two miscounts of |d| > 0.1 cancel in the fraction
        edges[b, start], edges[b, start + 1] = 0.0975 + 0.001 * d.signs(1), 0.0980 + 0.001 * d.signs(1)
        edges[b, start + 2] = -0.1027 + 0.001 * d.signs(1)
    empty = d.spans(6, 20)
    empty[1] = empty[4] = (0, 0)
    return [
        ("symmetric_tails_float32_B4_T40", case(d.spans(4, 40, lengths=(8, None)), 40)),
        ("skewed_positive_float32_B4_T32", case(d.spans(4, 32, lengths=(8, None)), 32, diffs=skewed)),
        ("largest_is_negative_float32_B3_T24", case(negative_spans, 24, diffs=negative)),
        ("tiny_mismatch_float32_B4_T40", case(d.spans(4, 40, lengths=(10, None)), 40, scale=1e-5, tail=0.0,
                                                 one_binade=True)),
        ("band_edges_float32_B3_T16", case(edge_spans, 16, diffs=edges)),
        ("empty_rows_float32_B6_T20", case(empty, 20)),
        ("long_mask_B4_T30", case(d.spans(4, 30), 30, mask_kind="long")),
        ("float_mask_B4_T30", case(d.spans(4, 30), 30, mask_kind="float")),
        ("float64_B5_T24", case(d.spans(5, 24), 24, dtype=torch.float64)),
        ("float64_float_mask_B3_T16", case(d.spans(3, 16), 16, dtype=torch.float64, mask_kind="float")),
        ("all_one_mask_B3_T16", case([(0, 16)] * 3, 16)),
        ("T1_B6", case([(0, 1), (0, 1), (0, 0), (0, 1), (0, 1), (0, 1)], 1)),
        ("B1_T50", case([(7, 30)], 50)),
        ("B16_T128_float32", case(d.spans(16, 128, lengths=(20, 100)), 128)),
        ("nan_and_inf_under_the_mask_float32_B4_T24", case(d.spans(4, 24), 24, non_finite=True)),
        ("error_shapes_differ_3x8_3x9", error((3, 8), (3, 9), torch.ones(3, 8, dtype=torch.bool))),
        ("error_empty_mask_3x8", error((3, 8), (3, 8), torch.zeros(3, 8, dtype=torch.bool))),
        ("error_mask_shape_differs_3x8_3x9", error((3, 8), (3, 8), torch.ones(3, 9, dtype=torch.bool))),
        ("error_mask_holds_a_2_3x8", error((3, 8), (3, 8), torch.ones(3, 8, dtype=torch.long).index_put_(
            (torch.tensor([1]), torch.tensor([2])), torch.tensor(2)))),
    ]


def variant_split_sums_one_ulp_apart(train_log_probs, rollout_log_probs, response_mask):
    """Grader-only: the reference with its signed sums taken as (sum of the d > 0) + (sum of the
    d < 0), each moved one unit of its rounding up, and its other means accumulated token after
    token: where a correct sum in another order lands. A signed mean cancels (by design) to far
    below its terms, so that its own rounding is no measure of theirs."""
    from course_lib import mismatch_report

    out = dict(mismatch_report(train_log_probs, rollout_log_probs, response_mask))  # and its ValueErrors
    m = response_mask.bool()
    diff = train_log_probs - rollout_log_probs
    zero = torch.zeros_like(diff)
    pos, neg = torch.where(m & (diff > 0), diff, zero).sum(-1), torch.where(m & (diff < 0), diff, zero).sum(-1)
    up = torch.tensor(float("inf"), dtype=diff.dtype)
    d = diff[m]
    out["mean_diff"] = (torch.nextafter(pos.sum(), up) + torch.nextafter(neg.sum(), up)) / d.numel()
    out["mean_abs"] = d.abs().cumsum(0)[-1] / d.numel()
    out["mean_k3"] = (torch.expm1(d) - d).cumsum(0)[-1] / d.numel()
    out["seq_log_ratio"] = torch.where(m.any(-1), torch.nextafter(pos, up) + torch.nextafter(neg, up), pos + neg)
    return out


# ---------------------------------------------------------------- the correct versions
# the correct version 'boolean_indexing' (autograder/graded/mismatch_report/test_mismatch_report.py), which the edits start from
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


CORRECT = {
    "boolean_indexing": INDEXING,
    # Python lists row by row, everything in float64, quantiles by hand, cast back at the end
    "loop_over_rows_float64_by_hand": """
        import math
        import torch
        def quantile(values, q):
            v = sorted(values)
            pos = q * (len(v) - 1)
            lo = int(math.floor(pos))
            hi = min(lo + 1, len(v) - 1)
            return v[lo] + (pos - lo) * (v[hi] - v[lo])
        def mismatch_report(train_log_probs, rollout_log_probs, response_mask):
            if train_log_probs.shape != rollout_log_probs.shape:
                raise ValueError(f"shapes differ: train_log_probs {list(train_log_probs.shape)}, rollout_log_probs {list(rollout_log_probs.shape)}")
            if list(response_mask.shape) != list(train_log_probs.shape):
                raise ValueError("response_mask and the log-probs have different shapes")
            dtype = train_log_probs.dtype
            B, T = train_log_probs.shape
            for b in range(B):
                for t in range(T):
                    if float(response_mask[b, t]) not in (0.0, 1.0):
                        raise ValueError(f"response_mask[{b}, {t}] is {float(response_mask[b, t])}, not 0 or 1")
            d, rows, nonempty = [], [], []
            for b in range(B):
                total = 0.0
                for t in range(T):
                    if response_mask[b, t] != 0:
                        x = float(train_log_probs[b, t]) - float(rollout_log_probs[b, t])
                        d.append(x)
                        total += x
                rows.append(total)
                if (response_mask[b] != 0).any():
                    nonempty.append(total)
            if not d:
                raise ValueError("response_mask has no token")
            n = len(d)
            a = [abs(x) for x in d]
            mean_abs = sum(a) / n
            std = math.sqrt(sum((x - mean_abs) ** 2 for x in a) / (n - 1)) if n > 1 else float("nan")
            out = {"mean_diff": sum(d) / n, "mean_abs": mean_abs, "std_abs": std,
                   "p95_abs": quantile(a, 0.95), "max_abs": max(a),
                   "frac_outside": sum(1 for x in d if math.exp(x) < 0.9 or math.exp(x) > 1.1) / n,
                   "mean_k3": sum(math.expm1(x) - x for x in d) / n}
            out = {k: torch.tensor(v, dtype=dtype) for k, v in out.items()}
            out["seq_log_ratio"] = torch.tensor(rows, dtype=dtype)
            out["seq_quantiles"] = torch.tensor([quantile(nonempty, q) for q in (0.05, 0.5, 0.95)], dtype=dtype)
            return out
    """,
    # no boolean indexing: sums with torch.where and the count, order statistics from a sort
    # that puts the masked positions last
    "where_and_counts_sorted_quantiles": """
        import torch
        def interpolate(sorted_values, n, q):
            pos = q * (n - 1)
            lo = int(pos)
            hi = min(lo + 1, n - 1)
            return sorted_values[lo] + (pos - lo) * (sorted_values[hi] - sorted_values[lo])
        def _response_mask(train_log_probs, rollout_log_probs, response_mask):
            # the notebook's given helper (shapes, (B, T), 0/1), as a student who calls it runs it
            if train_log_probs.shape != rollout_log_probs.shape or response_mask.shape != train_log_probs.shape:
                raise ValueError("the shapes differ")
            if train_log_probs.dim() != 2:
                raise ValueError("not (B, T)")
            if not bool(((response_mask == 0) | (response_mask == 1)).all()):
                raise ValueError("response_mask must hold only 0 and 1")
            return response_mask.bool()
        def mismatch_report(train_log_probs, rollout_log_probs, response_mask):
            m = _response_mask(train_log_probs, rollout_log_probs, response_mask)
            n = int(m.sum())
            if n == 0:
                raise ValueError("response_mask selects nothing")
            zero = torch.zeros((), dtype=train_log_probs.dtype)
            diff = torch.where(m, train_log_probs - rollout_log_probs, zero)
            a = diff.abs()
            mean_abs = a.sum() / n
            var = torch.where(m, (a - mean_abs) ** 2, zero).sum() / (n - 1)
            ordered = torch.where(m, a, torch.full_like(a, float("inf"))).flatten().sort().values
            k3 = torch.where(m, torch.special.expm1(diff) - diff, zero)
            outside = m & ((torch.exp(diff) > 1.1) | (torch.exp(diff) < 0.9))
            seq = diff.sum(dim=1)
            rows = m.any(dim=1)
            seq_sorted = seq[rows].sort().values
            k = int(rows.sum())
            return {"mean_diff": diff.sum() / n, "mean_abs": mean_abs, "std_abs": var.sqrt(),
                    "p95_abs": interpolate(ordered, n, 0.95), "max_abs": ordered[n - 1],
                    "frac_outside": outside.sum().to(diff.dtype) / n, "mean_k3": k3.sum() / n,
                    "seq_log_ratio": seq,
                    "seq_quantiles": torch.stack([interpolate(seq_sorted, k, q) for q in (0.05, 0.5, 0.95)])}
    """,
    # numpy in float64 (np.quantile is linear by default; ddof=1 for the unbiased std)
    "numpy_float64": """
        import numpy as np
        import torch
        def mismatch_report(train_log_probs, rollout_log_probs, response_mask):
            if tuple(train_log_probs.shape) != tuple(rollout_log_probs.shape):
                raise ValueError(f"train_log_probs {tuple(train_log_probs.shape)} != rollout_log_probs {tuple(rollout_log_probs.shape)}")
            train = train_log_probs.detach().double().numpy()
            rollout = rollout_log_probs.detach().double().numpy()
            if tuple(response_mask.shape) != tuple(train_log_probs.shape):
                raise ValueError("response_mask does not align with the log-probs")
            raw = response_mask.detach().double().numpy()
            if not np.isin(raw, (0.0, 1.0)).all():
                raise ValueError("response_mask holds values other than 0 and 1")
            m = raw.astype(bool)
            if m.sum() == 0:
                raise ValueError("empty response_mask")
            diff = np.where(m, train - rollout, 0.0)
            d = diff[m]
            a = np.abs(d)
            r = np.exp(d)
            seq = diff.sum(axis=1)
            out = {"mean_diff": d.mean(), "mean_abs": a.mean(), "std_abs": a.std(ddof=1),
                   "p95_abs": np.quantile(a, 0.95), "max_abs": a.max(),
                   "frac_outside": np.mean((r < 0.9) | (r > 1.1)), "mean_k3": np.mean(np.expm1(d) - d),
                   "seq_log_ratio": seq, "seq_quantiles": np.quantile(seq[m.any(axis=1)], [0.05, 0.5, 0.95])}
            return {k: torch.as_tensor(v).to(train_log_probs.dtype) for k, v in out.items()}
    """,
}


# ---------------------------------------------------------------- the known mistakes
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
