"""Hidden cases of `mismatch_report(train_log_probs, rollout_log_probs, response_mask) -> dict`
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

GRADED = "mismatch_report"
# each error case and the phrase of the reference's `Raises:` section that states it (tests/test_contracts.py)
RAISES = {
    "error_shapes_differ_3x8_3x9": "log-probs of two shapes",
    "error_empty_mask_3x8": "a mask without a response token",
    "error_mask_shape_differs_3x8_3x9": "a response_mask of another shape than the log-probs",
    "error_mask_holds_a_2_3x8": "a mask that holds anything but 0 and 1",
}
# grader-only: the signed sums one unit of rounding of their terms' scale apart (the signed mean
# cancels to near 0 by design; in float64, where the reference is its own truth, too)
VARIANTS = ["autograder.suites.mismatch_report:variant_split_sums_one_ulp_apart"]
KEYS = ("mean_diff", "mean_abs", "std_abs", "p95_abs", "max_abs", "frac_outside", "mean_k3", "seq_log_ratio",
        "seq_quantiles")


def make_inputs(gen: torch.Generator) -> list[tuple[str, dict]]:
    from ._response_mask_cases import MaskDraw

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


def call(fn, inputs: dict) -> dict:
    train = inputs["train_log_probs"].clone()
    rollout = inputs["rollout_log_probs"].clone()
    mask = inputs["response_mask"].clone()
    if inputs["expect_error"]:
        try:
            fn(train, rollout, mask)
        except Exception as e:  # noqa: BLE001 - which exception is the output
            return {"raises": "ValueError" if isinstance(e, ValueError) else "other"}
        return {"raises": None}
    before = (train.clone(), rollout.clone(), mask.clone())
    report = fn(train, rollout, mask)
    result = {k: report.get(k) for k in KEYS} if isinstance(report, dict) else {"report": report}
    result["inputs_unchanged"] = all(_same(a, b) for a, b in zip((train, rollout, mask), before))
    return result


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal values, with NaN equal to NaN (torch.equal says a tensor holding NaN differs from its copy)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if not a.is_floating_point():
        return torch.equal(a, b)
    return torch.equal(a.isnan(), b.isnan()) and torch.equal(a.nan_to_num(0.0), b.nan_to_num(0.0))
