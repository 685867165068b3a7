"""Hidden cases of `importance_weights(train_log_probs, rollout_log_probs, response_mask, mode, cap,
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

GRADED = "importance_weights"
# each error case and the phrase of the reference's `Raises:` section that states it (tests/test_contracts.py)
RAISES = {
    "error_unknown_mode": "an unknown mode",
    "error_unknown_aggregate": "an unknown aggregate",
    "error_cap_0": "cap <= 0",
    "error_cap_negative": "cap <= 0",
    "error_shapes_differ_3x8_3x9": "shapes that differ",
}


def make_inputs(gen: torch.Generator) -> list[tuple[str, dict]]:
    from ._response_mask_cases import MaskDraw

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


def call(fn, inputs: dict) -> dict:
    train = inputs["train_log_probs"].clone().requires_grad_()
    rollout = inputs["rollout_log_probs"].clone().requires_grad_()
    mask = inputs["response_mask"].clone()
    args = (train, rollout, mask, inputs["mode"], inputs["cap"])
    if inputs["expect_error"]:
        try:
            fn(*args, **inputs["kwargs"])
        except Exception as e:  # noqa: BLE001 - which exception is the output
            return {"raises": "ValueError" if isinstance(e, ValueError) else "other"}
        return {"raises": None}
    before = (train.detach().clone(), rollout.detach().clone(), mask.clone())
    w = fn(*args, **inputs["kwargs"])
    unchanged = all(torch.equal(a, b) for a, b in zip((train.detach(), rollout.detach(), mask), before))
    detached = not (isinstance(w, torch.Tensor) and w.requires_grad)
    return {"weights": w, "detached": detached, "inputs_unchanged": unchanged}
