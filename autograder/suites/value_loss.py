"""Hidden cases of `value_loss(values, old_values, returns, response_mask, cliprange_value) -> ()`:
the clipped value loss 0.5 * masked_mean(max((V - R)^2, (clip(V, V_old - c, V_old + c) - R)^2)),
one mean over every response token of the batch (sum over the mask / mask.sum()), on rows of
different lengths (a prompt before, padding after), bool / long / int / float masks, float32 and
float64.

Outputs: the scalar loss and its gradient with respect to `values` (0 on a token whose clipped
term is the larger: the clamp holds it; (V - R) / count where the unclipped term is).

Every token is drawn away from the decisions' edges: |V - V_old| is below 0.8 c or above 1.2 c,
and where the clip is active the return sits away from the midpoint of V and clip(V) (at
V + t * (clip(V) - V) with t outside (0.4, 0.6)), so that float32 and float64 take the same
branch of the clamp and of the max on every token.

What the cases are built to catch:

- `clip_active_both_sides_*` (every token beyond V_old +- c, on both sides, with both branches
  of the max), `clip_mixed_*`, `cliprange_*_mixed_*`: min in the place of max, the max taken
  before squaring (max(V - R, clip(V) - R)^2), the unclipped or the clipped term alone, the clip
  around the returns (clip(V, R - c, R + c), whose term is never the larger: the plain squared
  error), V clipped to [-c, c], a relative clip like the actor's ratio
  (clip(V, V_old (1 - c), V_old (1 + c))), a clip range of the wrong size;
- `clip_inactive_*`, `cliprange_1e4_never_clips_*`, `first_epoch_values_equal_old_values_*`
  (V = V_old: the first epoch on a fresh rollout): the plain squared error is the loss there, so
  a clip that moves V when it should not (to [-c, c], a max turned into a min) is caught;
- `rows_of_very_different_lengths_*` (1 to 16 tokens, a badly fit short row) and every other
  case (a short and a long response in each): the mean of per-row means, which weighs a short
  row's tokens more, while every response token must weigh the same;
- `masked_out_garbage_1e4_*` (values, old values and returns of magnitude 1e3 to 1e4 where the
  mask is 0) and every case with a prompt or padding: a mean over every position (the mask
  ignored, or its zeros counted), a sum instead of a mean; and every case: the 0.5 dropped;
- `long_mask_*`, `int_mask_*`, `float_mask_*`: `x[mask]` with a mask that is not bool (it
  indexes rows instead of selecting tokens, or raises);
- `float64_*`: float64 computed (or returned) in float32;
- the shapes (`square_B6_T6_*`, `B1_*`, `T1_*`, `B8_T128_*`): a mean over the wrong dim (per
  column, dim=0: it weighs tokens unevenly too, and a square batch runs it without an error).
"""

from __future__ import annotations

import torch

GRADED = "value_loss"


def make_inputs(gen: torch.Generator) -> list[tuple[str, dict]]:
    def uniform(shape, lo, hi):
        return lo + (hi - lo) * torch.rand(shape, generator=gen, dtype=torch.float64)

    def signs(shape):
        return torch.where(torch.rand(shape, generator=gen) < 0.5, -1.0, 1.0).double()

    def spans(T, starts, lengths):
        """A (B, T) bool mask: row i keeps tokens starts[i] .. starts[i] + lengths[i] - 1."""
        m = torch.zeros(len(starts), T, dtype=torch.bool)
        for i, (s, n) in enumerate(zip(starts, lengths)):
            m[i, s:s + n] = True
        return m

    def responses(B, T):
        """A response after a prompt in every row; with B > 1 the first of 1 token, the last to the end (2 tokens
        or more)."""
        starts = torch.randint(0, max(1, T // 3), (B,), generator=gen).tolist()
        lengths = [int(torch.randint(1, T - s + 1, (), generator=gen)) for s in starts]
        if B > 1:
            lengths[0] = 1
            starts[-1] = min(starts[-1], T - 2) if T >= 2 else 0
            lengths[-1] = T - starts[-1]
        return spans(T, starts, lengths)

    def draw(mask, c, active_share=0.5, moves=None):
        """old values, values and returns, (B, T) float64, away from every decision's edge."""
        shape = mask.shape
        old = torch.randn(shape, generator=gen, dtype=torch.float64)
        planted = {}
        if moves is None:  # |V - V_old| in [0, 0.8 c) or (1.2 c, 3 c]
            active = torch.rand(shape, generator=gen) < active_share
            moves = signs(shape) * torch.where(active, uniform(shape, 1.2 * c, 3.0 * c), uniform(shape, 0.0, 0.8 * c))
            if active_share > 0:  # on every draw, the first two response tokens clipped: V above V_old + c with
                # the clipped term the larger (R between V and clip(V), nearer V: V - R > 0 the smaller square),
                # then V below V_old - c with the unclipped term the larger
                for i, move, ti in zip(mask.flatten().nonzero().view(-1)[:2].tolist(), (2.0 * c, -2.0 * c), (0.2, 1.5)):
                    moves.view(-1)[i], planted[i] = move, ti
        v = old + moves
        vc = old + moves.clamp(-c, c)
        # where the clip is active: R = V + t (clip(V) - V), t < 0.4 (the clipped term is the larger) or t > 0.6
        t = torch.where(torch.rand(shape, generator=gen) < 0.5, uniform(shape, -2.0, 0.4), uniform(shape, 0.6, 3.0))
        for i, ti in planted.items():
            t.view(-1)[i] = ti
        returns = torch.where(moves.abs() > c, v + t * (vc - v), v + 0.7 * torch.randn(shape, generator=gen,
                                                                                        dtype=torch.float64))
        return v, old, returns

    def case(mask, c, dtype=torch.float32, mask_kind="bool", garbage=False, **kw):
        v, old, returns = draw(mask, c, **kw)
        if garbage:
            n = int((~mask).sum())
            for x in (v, old, returns):
                x[~mask] = signs(n) * uniform(n, 1e3, 1e4)
        m = {"bool": mask, "long": mask.long(), "int": mask.int(), "float": mask.to(dtype)}[mask_kind]
        return {"values": v.to(dtype), "old_values": old.to(dtype), "returns": returns.to(dtype),
                "response_mask": m, "cliprange_value": c}

    def both_sides(B, T, c):
        """Every token beyond the clip, on both sides in every row of 2 tokens or more."""
        mask = responses(B, T)
        moves = signs((B, T)) * uniform((B, T), 1.2 * c, 3.0 * c)
        for row in range(B):
            cols = mask[row].nonzero().view(-1)
            if len(cols) >= 2:
                moves[row, cols[0]], moves[row, cols[1]] = moves[row, cols[0]].abs(), -moves[row, cols[1]].abs()
        return case(mask, c, moves=moves)

    # a 1-token row badly fit (error about 3), long rows fit well: a per-row mean weighs it 4x more
    uneven = spans(16, [0, 0, 2, 4], [1, 16, 3, 12])
    uneven_case = case(uneven, 0.2)
    uneven_case["returns"][0, 0] = uneven_case["values"][0, 0] + 3.0
    uneven_case["old_values"][0, 0] = uneven_case["values"][0, 0]  # the clip inactive on that token
    return [
        ("clip_active_both_sides_B4_T8_c0.2", both_sides(4, 8, 0.2)),
        ("clip_mixed_B5_T10_c0.2", case(responses(5, 10), 0.2)),
        ("clip_inactive_B4_T9_c0.2", case(responses(4, 9), 0.2, active_share=0.0)),
        ("cliprange_0.5_mixed_B4_T8", case(responses(4, 8), 0.5)),
        ("cliprange_0.05_mixed_B3_T10", case(responses(3, 10), 0.05)),
        ("cliprange_1e4_never_clips_B3_T10", case(responses(3, 10), 1e4,
                                                  moves=signs((3, 10)) * uniform((3, 10), 0.0, 3.0))),
        ("first_epoch_values_equal_old_values_B3_T7", case(responses(3, 7), 0.2, moves=torch.zeros(3, 7,
                                                                                                   dtype=torch.float64))),
        ("rows_of_very_different_lengths_B4_T16", uneven_case),
        ("masked_out_garbage_1e4_B4_T10", case(responses(4, 10), 0.2, garbage=True)),
        ("long_mask_B3_T9", case(responses(3, 9), 0.2, mask_kind="long")),
        ("int_mask_B3_T7", case(responses(3, 7), 0.2, mask_kind="int")),
        ("float_mask_B3_T9", case(responses(3, 9), 0.2, mask_kind="float")),
        ("float64_B4_T8", case(responses(4, 8), 0.2, dtype=torch.float64)),
        ("float64_float_mask_garbage_B3_T6", case(responses(3, 6), 0.2, dtype=torch.float64, mask_kind="float",
                                                  garbage=True)),
        # fixed spans: the column counts differ (3, 4, 5, ...), so a per-column mean is not the token mean
        ("square_B6_T6_c0.2", case(spans(6, [0, 1, 0, 2, 1, 0], [1, 5, 3, 4, 2, 6]), 0.2)),
        ("B1_T12_c0.2", case(responses(1, 12), 0.2)),
        ("T1_B6_c0.2", case(torch.ones(6, 1, dtype=torch.bool), 0.2)),
        ("B8_T128_c0.2", case(responses(8, 128), 0.2)),
    ]


def call(fn, inputs: dict) -> dict:
    values = inputs["values"].clone().requires_grad_()
    loss = fn(values, inputs["old_values"].clone(), inputs["returns"].clone(), inputs["response_mask"].clone(),
              inputs["cliprange_value"])
    loss.backward()
    return {"loss": loss, "grad_values": values.grad}
