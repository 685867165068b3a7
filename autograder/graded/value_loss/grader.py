"""The grader's side of `value_loss` (notebook 11): how its hidden cases are drawn, the correct
versions that must earn full marks and the known mistakes that must lose them, each with the
sentence a student reads (`autograder.mistakes`). Never in a student kit or the grading sandbox,
which hold the folder's __init__.py only.

Hidden cases of `value_loss(values, old_values, returns, response_mask, cliprange_value) -> ()`:
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

from autograder.mistakes import edited, Mistake


# ---------------------------------------------------------------- the hidden cases
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


# ---------------------------------------------------------------- the correct versions
# the correct version 'where_maximum_tensor_clamp' (autograder/graded/value_loss/test_value_loss.py), which the edits start from
BASE = """
        import torch
        def value_loss(values, old_values, returns, response_mask, cliprange_value):
            clipped = torch.clamp(values, old_values - cliprange_value, old_values + cliprange_value)
            per_token = torch.maximum((values - returns) ** 2, (clipped - returns) ** 2)
            keep = response_mask.bool()
            kept = torch.where(keep, per_token, torch.zeros_like(per_token))
            return 0.5 * kept.sum() / keep.sum()
    """

CLIP = "clipped = torch.clamp(values, old_values - cliprange_value, old_values + cliprange_value)"

PER = "per_token = torch.maximum((values - returns) ** 2, (clipped - returns) ** 2)"

RET = "return 0.5 * kept.sum() / keep.sum()"


CORRECT = {
    "where_maximum_tensor_clamp": BASE,
    # a float mask multiplied in (harmless here: the masked-out values are finite), max of a stack
    "float_mask_stack_max": """
        import torch
        def value_loss(values, old_values, returns, response_mask, cliprange_value):
            m = response_mask.to(values.dtype)
            v_clip = old_values + (values - old_values).clamp(-cliprange_value, cliprange_value)
            losses = torch.stack([(values - returns).pow(2), (v_clip - returns).pow(2)])
            per_token = losses.max(dim=0).values
            return (per_token * m).sum() / m.sum() / 2
    """,
    "boolean_indexing": """
        import torch
        def value_loss(values, old_values, returns, response_mask, cliprange_value):
            keep = response_mask != 0
            v, v_old, r = values[keep], old_values[keep], returns[keep]
            v_clip = torch.min(torch.max(v, v_old - cliprange_value), v_old + cliprange_value)
            a, b = (v - r) ** 2, (v_clip - r) ** 2
            return 0.5 * torch.where(a > b, a, b).mean()
    """,
    "float64_inside": """
        import torch
        def value_loss(values, old_values, returns, response_mask, cliprange_value):
            v, v_old, r = values.double(), old_values.double(), returns.double()
            v_clip = v_old + torch.clamp(v - v_old, min=-cliprange_value, max=cliprange_value)
            per_token = 0.5 * torch.maximum((v - r) ** 2, (v_clip - r) ** 2)
            m = response_mask.bool()
            return (per_token.masked_fill(~m, 0.0).sum() / m.sum()).to(values.dtype)
    """,
    # row by row: each row's sum and its count, one division at the end
    "loop_over_rows": """
        import torch
        def value_loss(values, old_values, returns, response_mask, cliprange_value):
            total = torch.zeros((), dtype=values.dtype)
            count = 0
            for v, v_old, r, m in zip(values, old_values, returns, response_mask.bool()):
                v, v_old, r = v[m], v_old[m], r[m]
                unclipped = (v - r) ** 2
                clipped = (torch.clamp(v, v_old - cliprange_value, v_old + cliprange_value) - r) ** 2
                total = total + torch.maximum(unclipped, clipped).sum()
                count += int(m.sum())
            return 0.5 * total / count
    """,
}


# ---------------------------------------------------------------- the known mistakes
MISTAKES = {
    "min_instead_of_max": Mistake(
        "takes the smaller of the two squared errors instead of the larger",
        edited(BASE, (PER, "per_token = torch.minimum((values - returns) ** 2, (clipped - returns) ** 2)")),
        ["clip_active_both_sides_B4_T8_c0.2", "clip_mixed_B5_T10_c0.2"]),
    # max(V - R, clip(V) - R)^2: the larger signed error, not the larger squared one
    "max_before_squaring": Mistake(
        "takes the larger signed error, then squares it, instead of the larger squared error",
        edited(BASE, (PER, "per_token = torch.maximum(values - returns, clipped - returns) ** 2")),
        ["clip_active_both_sides_B4_T8_c0.2", "clip_mixed_B5_T10_c0.2"]),
    # the plain squared error: no clip at all
    "unclipped_term_only": Mistake(
        "returns the plain squared error without any clip",
        edited(BASE, (PER, "per_token = (values - returns) ** 2")),
        ["clip_active_both_sides_B4_T8_c0.2", "cliprange_0.05_mixed_B3_T10"]),
    "clipped_term_only": Mistake(
        "returns the clipped squared error alone instead of the larger of the two",
        edited(BASE, (PER, "per_token = (clipped - returns) ** 2")),
        ["clip_active_both_sides_B4_T8_c0.2", "clip_mixed_B5_T10_c0.2"]),
    # the clip around the returns, not around the old values: its term is never the larger, so this is the
    # plain squared error (right where the clip is inactive, wrong where it is active)
    "clip_around_the_returns": Mistake(
        "clips the values around the returns instead of around the old values",
        edited(BASE, (
            CLIP, "clipped = torch.clamp(values, returns - cliprange_value, returns + cliprange_value)")),
        ["clip_active_both_sides_B4_T8_c0.2", "clip_mixed_B5_T10_c0.2", "cliprange_0.05_mixed_B3_T10"]),
    # V itself clipped to [-c, c]
    "values_clipped_to_plus_minus_c": Mistake(
        "clips the values to [-c, c] instead of to old values +- c",
        edited(BASE, (CLIP, "clipped = torch.clamp(values, -cliprange_value, cliprange_value)")),
        ["clip_inactive_B4_T9_c0.2", "first_epoch_values_equal_old_values_B3_T7"]),
    # a relative clip, as the actor's ratio: V_old (1 - c) .. V_old (1 + c)
    "relative_clip_like_the_ratio": Mistake(
        "clips relatively, to V_old (1 +- c), as the actor's ratio, instead of to V_old +- c",
        edited(BASE, (
            CLIP, "lo, hi = old_values * (1 - cliprange_value), old_values * (1 + cliprange_value)\n"
                  "            clipped = torch.clamp(values, torch.minimum(lo, hi), torch.maximum(lo, hi))")),
        ["clip_mixed_B5_T10_c0.2", "clip_active_both_sides_B4_T8_c0.2"]),
    "half_dropped": Mistake(
        "drops the factor 0.5",
        edited(BASE, (RET, "return kept.sum() / keep.sum()")),
        ["clip_mixed_B5_T10_c0.2", "float64_B4_T8"]),
    # the mask never used: the prompt's and the padding's values in the mean
    "mean_over_all_tokens_ignoring_the_mask": Mistake(
        "never uses the mask, so the prompt's and the padding's values enter the mean",
        edited(BASE, (RET, "return 0.5 * per_token.mean()")),
        ["masked_out_garbage_1e4_B4_T10", "clip_mixed_B5_T10_c0.2"]),
    # zeros where the mask is 0, then a plain mean: divided by every position
    "mean_counting_the_masked_zeros": Mistake(
        "divides by every position instead of by the number of response tokens",
        edited(BASE, (RET, "return 0.5 * kept.mean()")),
        ["clip_mixed_B5_T10_c0.2", "masked_out_garbage_1e4_B4_T10"]),
    # each response's mean, then the mean over responses (the actor's aggregation)
    "per_row_mean_then_batch_mean": Mistake(
        "averages each response, then the responses, instead of one mean over the response tokens",
        edited(BASE, (RET, "return 0.5 * (kept.sum(-1) / keep.sum(-1)).mean()")),
        ["rows_of_very_different_lengths_B4_T16", "clip_mixed_B5_T10_c0.2"]),
    # each column's mean over the rows (dim=0), then their mean: a square batch runs it without an error
    "per_column_mean": Mistake(
        "averages each column over the rows, then the columns",
        edited(BASE, (RET, "return 0.5 * (kept.sum(0) / keep.sum(0).clamp(min=1)).mean()")),
        ["square_B6_T6_c0.2", "rows_of_very_different_lengths_B4_T16"]),
    "sum_instead_of_mean": Mistake(
        "sums over the response tokens instead of averaging",
        edited(BASE, (RET, "return 0.5 * kept.sum()")),
        ["clip_mixed_B5_T10_c0.2", "T1_B6_c0.2"]),
    # x[mask] with a long or int mask indexes rows, with a float mask it raises
    "indexes_with_the_mask_as_given": Mistake(
        "indexes with the mask as given: a long or int mask indexes rows, a float mask raises",
        """
        import torch
        def value_loss(values, old_values, returns, response_mask, cliprange_value):
            v, v_old, r = values[response_mask], old_values[response_mask], returns[response_mask]
            v_clip = torch.clamp(v, v_old - cliprange_value, v_old + cliprange_value)
            return 0.5 * torch.maximum((v - r) ** 2, (v_clip - r) ** 2).mean()
    """,
        ["long_mask_B3_T9", "int_mask_B3_T7", "float_mask_B3_T9"]),
    "always_float32": Mistake(
        "computes in float32 always: float64 inputs must give float64",
        edited(BASE, (CLIP, "values, old_values, returns = values.float(), old_values.float(), returns.float()\n"
                                               "            " + CLIP)),
        ["float64_B4_T8", "float64_float_mask_garbage_B3_T6"]),
    # notebook 11's visible check: "the gradient must reach values"
    "values_detached": Mistake(
        "detaches the values, so the loss has the right value but the critic gets no gradient",
        edited(BASE, (CLIP, "values = values.detach()\n            " + CLIP)),
        ["clip_mixed_B5_T10_c0.2", "float64_B4_T8"],
        # it raises on every case that asks for no error (RuntimeError in backward: no graph):
        # an exception's class alone is no evidence of this mistake, so recognition cannot name it
        recognisable=False),
}
