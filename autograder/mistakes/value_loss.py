"""The known mistakes of `value_loss` (notebook 11): the catalogue `autograder.mistakes` describes."""

from __future__ import annotations

from autograder.mistakes import Mistake, edited


# the correct version 'where_maximum_tensor_clamp' (tests/graded/test_value_loss.py), which the edits start from
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
