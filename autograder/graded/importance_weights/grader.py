"""The grader's side of `importance_weights` (notebook 15): how its hidden cases are drawn, the correct
versions that must earn full marks and the known mistakes that must lose them, each with the
sentence a student reads (`autograder.mistakes`). Never in a student kit or the grading sandbox,
which hold the folder's __init__.py only.

Hidden cases of `importance_weights(train_log_probs, rollout_log_probs, response_mask, mode, cap,
aggregate="sum") -> (B, T)` (notebook 15): ratios pi_train / pi_rollout per token
("token_truncate": min(r, cap); "token_mask": r where r <= cap, else 0) or per row, from the sum
(aggregate="mean": the mean) of the row's log-ratios over its response tokens, broadcast to them
("sequence_truncate", "sequence_mask"); 0 where the mask is 0; detached.

Masks are one contiguous response per row (prompt, response, padding; empty rows in their own
cases). Per-token log-ratios are what two engines show (most N(0, 0.03^2), a fifth of magnitude
0.1 to 1.5) with, in the token cases, a ratio above cap and one below 1 / cap planted in every
case; in the sequence cases each row's sum (or mean) is set to a target drawn on both sides of
log cap. No log-ratio (token, sum or mean) is within 1e-4 (1e-3 for sums and means) of log cap,
so that no side of the cap is decided by rounding. Where the mask is 0 both log-probs hold
independent garbage of magnitude 5 to 50. Caps 1.5, 2, 3 and 5; float32 and float64; bool,
long and float masks. Error cases must raise ValueError: their output is {"raises":
"ValueError"}, {"raises": "other"} or {"raises": None}.

Outputs: the weights, whether they are detached (the log-probs of every case require grad), and
whether the caller's tensors were left unchanged.

What the cases are built to catch:

- every case: the ratio inverted (pi_rollout / pi_train);
- `token_truncate_*`: the truncation as a clamp with a lower bound too (a ratio below 1 / cap
  is planted); `token_mask_*`: the mask zeroing the ratios below cap instead of above;
- every case (garbage off the mask): weights not 0 where the mask is 0; every sequence case: a
  row's sum over every position (the garbage of the prompt and the padding in it), a sum
  multiplied by the mask after exp (inf * 0 = NaN);
- `sequence_*_sum_*`: the mean where the sum is asked (aggregate="sum" passed, or left to its
  default in `*_default_aggregate_*`); `sequence_*_mean_*`: the sum where the mean is asked, the
  mean over the row's width T instead of its response tokens;
- `overflow_*` (a row whose log-ratios sum to about +-120: exp overflows float32): inf where
  truncation gives cap, inf * 0 = NaN for the mask mode written as r * (r <= cap);
- `empty_rows_*`: a mean of no token (0 / 0) leaking NaN; `long_mask_*`, `float_mask_*`: a
  mask used as bool without `.bool()`; `float64_*`: float64 computed or returned in float32;
- `detached`: the weights left in the graph (a gradient into the log-probs through the weights);
- errors: an unknown mode or aggregate, cap 0 and negative, shapes that differ.
"""

from __future__ import annotations

import torch

from autograder.graded._response_mask_cases import MaskDraw
from autograder.mistakes import edited, Mistake


# ---------------------------------------------------------------- the hidden cases
# each error case and the phrase of the reference's `Raises:` section that states it (tests/test_contracts.py)
RAISES = {
    "error_unknown_mode": "an unknown mode",
    "error_unknown_aggregate": "an unknown aggregate",
    "error_cap_0": "cap <= 0",
    "error_cap_negative": "cap <= 0",
    "error_shapes_differ_3x8_3x9": "shapes that differ",
}


def make_inputs(gen: torch.Generator) -> list[tuple[str, dict]]:

    d = MaskDraw(gen)

    def case(spans, T, mode, cap, aggregate="sum", dtype=torch.float32, mask_kind="bool", pass_aggregate=True,
             targets=None):
        m = d.mask_of(T, spans)
        train, rollout = d.log_prob_pair(d.capped_log_ratios(spans, T, mode, cap, aggregate, targets), m)
        mk = {"bool": m, "long": m.long(), "float": m.to(dtype)}[mask_kind]
        kwargs = {"aggregate": aggregate} if pass_aggregate else {}
        return {"train_log_probs": train.to(dtype), "rollout_log_probs": rollout.to(dtype), "response_mask": mk,
                "mode": mode, "cap": cap, "kwargs": kwargs, "expect_error": False}

    def error(mode="token_truncate", cap=2.0, shapes=((3, 8), (3, 8)), **kwargs):
        return {"train_log_probs": -torch.rand(*shapes[0], generator=gen),
                "rollout_log_probs": -torch.rand(*shapes[1], generator=gen),
                "response_mask": torch.ones(*shapes[0], dtype=torch.bool), "mode": mode, "cap": cap,
                "kwargs": kwargs, "expect_error": True}

    empty = d.spans(5, 16)
    empty[1] = empty[2] = (0, 0)
    overflow = [120.0, -120.0, 0.3, 1.2]
    return [
        ("token_truncate_cap2_float32_B4_T24", case(d.spans(4, 24), 24, "token_truncate", 2.0)),
        ("token_truncate_cap1.5_long_mask_B4_T20", case(d.spans(4, 20), 20, "token_truncate", 1.5, mask_kind="long")),
        ("token_mask_cap2_float32_B4_T24", case(d.spans(4, 24), 24, "token_mask", 2.0)),
        ("token_mask_cap3_float_mask_B4_T20", case(d.spans(4, 20), 20, "token_mask", 3.0, mask_kind="float")),
        ("sequence_truncate_sum_cap2_B6_T24", case(d.spans(6, 24), 24, "sequence_truncate", 2.0)),
        ("sequence_mask_sum_cap2_B6_T24", case(d.spans(6, 24), 24, "sequence_mask", 2.0)),
        ("sequence_mask_default_aggregate_cap3_B6_T20", case(d.spans(6, 20), 20, "sequence_mask", 3.0,
                                                             pass_aggregate=False)),
        ("sequence_truncate_mean_cap1.5_B6_T24", case(d.spans(6, 24), 24, "sequence_truncate", 1.5, aggregate="mean")),
        ("sequence_mask_mean_cap2_B6_T24", case(d.spans(6, 24), 24, "sequence_mask", 2.0, aggregate="mean")),
        ("overflow_sequence_truncate_sum_cap2_B4_T20", case(d.spans(4, 20), 20, "sequence_truncate", 2.0,
                                                            targets=torch.tensor(overflow, dtype=torch.float64))),
        ("overflow_sequence_mask_sum_cap2_B4_T20", case(d.spans(4, 20), 20, "sequence_mask", 2.0,
                                                        targets=torch.tensor(overflow, dtype=torch.float64))),
        ("empty_rows_sequence_mask_mean_cap2_B5_T16", case(empty, 16, "sequence_mask", 2.0, aggregate="mean")),
        ("empty_rows_token_truncate_cap2_B5_T16", case(empty, 16, "token_truncate", 2.0)),
        ("float64_token_mask_cap5_B4_T16", case(d.spans(4, 16), 16, "token_mask", 5.0, dtype=torch.float64)),
        ("float64_sequence_truncate_sum_cap2_long_mask_B4_T16", case(d.spans(4, 16), 16, "sequence_truncate", 2.0,
                                                                     dtype=torch.float64, mask_kind="long")),
        ("B8_T96_sequence_truncate_sum_cap2", case(d.spans(8, 96, lengths=(20, 80)), 96, "sequence_truncate", 2.0)),
        ("error_unknown_mode", error(mode="sequence_clip")),
        ("error_unknown_aggregate", error(mode="sequence_mask", aggregate="max")),
        ("error_cap_0", error(cap=0.0)),
        ("error_cap_negative", error(mode="token_mask", cap=-2.0)),
        ("error_shapes_differ_3x8_3x9", error(shapes=((3, 8), (3, 9)))),
    ]


# ---------------------------------------------------------------- the correct versions
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

# the correct version 'where_under_no_grad' (autograder/graded/importance_weights/test_importance_weights.py), which the edits start from
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

# the correct version 'boolean_indexing_float64' (autograder/graded/importance_weights/test_importance_weights.py), which edits start from
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


CORRECT = {
    "where_under_no_grad": WHERE,
    # Python floats row by row (exp of up to +-120 is finite in float64)
    "loop_over_rows_python_floats": """
        import math
        import torch
        def importance_weights(train_log_probs, rollout_log_probs, response_mask, mode, cap, aggregate="sum"):
""" + CHECKS + """
            train, rollout = train_log_probs.detach().tolist(), rollout_log_probs.detach().tolist()
            B, T = train_log_probs.shape
            out = torch.zeros(B, T, dtype=train_log_probs.dtype)
            for b in range(B):
                idx = [t for t in range(T) if response_mask[b, t] != 0]
                logs = [train[b][t] - rollout[b][t] for t in idx]
                if mode.startswith("sequence") and idx:
                    s = sum(logs) / (len(idx) if aggregate == "mean" else 1)
                    logs = [s] * len(idx)
                for t, x in zip(idx, logs):
                    r = math.exp(min(x, 700.0))
                    if mode.endswith("truncate"):
                        out[b, t] = min(r, cap)
                    else:
                        out[b, t] = r if r <= cap else 0.0
            return out
    """,
    # boolean indexing, float64 inside, detached at the start
    "boolean_indexing_float64": BOOLEAN_INDEXING_FLOAT64,
    # in log space: truncation as exp(min(log r, log cap)), the mask as log r <= log cap
    "log_space_comparisons": """
        import math
        import torch
        def importance_weights(train_log_probs, rollout_log_probs, response_mask, mode, cap, aggregate="sum"):
""" + CHECKS + """
            mask = response_mask.to(train_log_probs.dtype)
            keep = response_mask != 0
            log_r = (train_log_probs - rollout_log_probs).detach().masked_fill(~keep, 0.0)
            level = mode.split("_")[0]
            if level == "sequence":
                n = mask.sum(-1, keepdim=True)
                log_r = log_r.sum(-1, keepdim=True) / (n.clamp(min=1) if aggregate == "mean" else 1)
                log_r = log_r * torch.ones_like(mask)
            log_cap = math.log(cap)
            if mode.endswith("truncate"):
                w = torch.exp(torch.minimum(log_r, torch.full_like(log_r, log_cap)))
            else:
                w = torch.where(log_r <= log_cap, torch.exp(log_r), torch.zeros_like(log_r))
            return w * mask
    """,
}


# ---------------------------------------------------------------- the known mistakes
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
