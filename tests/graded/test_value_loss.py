"""value_loss (notebook 11): the reference's contract, correct versions that earn full marks through
the real judge, and realistic mistakes that lose them (CONTRIBUTING.md, "Adding a graded function")."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from course_lib import value_loss
from tests.helpers import PROPERTY_SETTINGS, corpus_tests, edited, many_draws_test, rand_mask, randn, seeds, shapes

SUITE = "value_loss"


def value_loss_float64(v, old, r, mask, c):
    """Independent: the kept tokens selected, the clip as min / max against the bounds, in float64."""
    keep = mask.bool()
    v, old, r = v.double()[keep], old.double()[keep], r.double()[keep]
    clipped = torch.minimum(torch.maximum(v, old - c), old + c)
    return 0.5 * torch.stack([(v - r) ** 2, (clipped - r) ** 2]).max(0).values.mean()


def inputs(shape, seed, dtype=torch.float32):
    old = randn(*shape, seed=seed, dtype=dtype)
    v = old + randn(*shape, seed=seed + 1, dtype=dtype) * 0.3
    r = v + randn(*shape, seed=seed + 2, dtype=dtype)
    m = rand_mask(*shape, seed=seed)
    m[..., 0] = True
    return v, old, r, m


# ---------------------------------------------------------------- the reference
@PROPERTY_SETTINGS
@given(shapes, seeds, st.sampled_from([0.05, 0.2, 1.0]), st.sampled_from([torch.float32, torch.float64]),
       st.sampled_from(["bool", "long", "float"]))
def test_reference_matches_float64(shape, seed, c, dtype, mask_kind):
    v, old, r, m = inputs(shape[:2], seed, dtype)
    mask = {"bool": m, "long": m.long(), "float": m.to(dtype)}[mask_kind]
    got = value_loss(v, old, r, mask, c)
    assert got.shape == () and got.dtype == dtype
    tol = 1e-6 if dtype == torch.float32 else 1e-12
    torch.testing.assert_close(got.double(), value_loss_float64(v, old, r, m, c), atol=tol, rtol=tol)


@PROPERTY_SETTINGS
@given(shapes, seeds)
def test_reference_without_a_clip_is_half_the_masked_squared_error(shape, seed):
    v, old, r, m = inputs(shape[:2], seed, torch.float64)
    v = v.requires_grad_()
    loss = value_loss(v, old, r, m, 1e6)
    expected = 0.5 * ((v.detach() - r) ** 2)[m].mean()
    torch.testing.assert_close(loss.detach(), expected)
    loss.backward()
    torch.testing.assert_close(v.grad, torch.where(m, v.detach() - r, 0.0) / m.sum())


def test_reference_the_clip_holds_the_values_where_its_term_is_larger():
    # V moved 0.5 above V_old with c = 0.2; R beyond V: the clipped term (V_old + 0.2 - R)^2 is the larger
    v = torch.tensor([[1.5, 1.5]], requires_grad=True)
    old = torch.tensor([[1.0, 1.0]])
    r = torch.tensor([[2.0, 0.0]])  # token 2: R below V_old, the unclipped term (1.5)^2 is the larger
    loss = value_loss(v, old, r, torch.ones(1, 2, dtype=torch.bool), 0.2)
    torch.testing.assert_close(loss, torch.tensor(0.5 * (0.8 ** 2 + 1.5 ** 2) / 2))
    loss.backward()
    torch.testing.assert_close(v.grad, torch.tensor([[0.0, 1.5 / 2]]))


def test_reference_weighs_every_token_the_same_whatever_its_rows_length():
    v = torch.tensor([[2.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]])
    zeros = torch.zeros(2, 4)
    mask = torch.tensor([[1, 0, 0, 0], [1, 1, 1, 1]])
    assert value_loss(v, v, zeros, mask, 0.2).item() == pytest.approx(0.5 * 4 / 5)  # not 0.5 * (4 + 0) / 2


def test_reference_ignores_what_is_under_the_mask():
    v, old, r, m = inputs((3, 6), 8)
    far = [x.clone() for x in (v, old, r)]
    for x, value in zip(far, (1e4, -1e4, 3e3)):
        x[~m] = value
    assert torch.equal(value_loss(*far, m, 0.2), value_loss(v, old, r, m, 0.2))


def test_reference_rejects_bad_shapes():
    x = torch.zeros(2, 3)
    with pytest.raises(ValueError, match="returns"):
        value_loss(x, x, torch.zeros(3, 2), torch.ones(2, 3), 0.2)
    with pytest.raises(ValueError, match="old_values"):
        value_loss(x, torch.zeros(2, 4), x, torch.ones(2, 3), 0.2)


# ---------------------------------------------------------------- correct versions and mistakes
CORRECT = {
    "where_maximum_tensor_clamp": """
        import torch
        def value_loss(values, old_values, returns, response_mask, cliprange_value):
            clipped = torch.clamp(values, old_values - cliprange_value, old_values + cliprange_value)
            per_token = torch.maximum((values - returns) ** 2, (clipped - returns) ** 2)
            keep = response_mask.bool()
            kept = torch.where(keep, per_token, torch.zeros_like(per_token))
            return 0.5 * kept.sum() / keep.sum()
    """,
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

BASE = CORRECT["where_maximum_tensor_clamp"]
CLIP = "clipped = torch.clamp(values, old_values - cliprange_value, old_values + cliprange_value)"
PER = "per_token = torch.maximum((values - returns) ** 2, (clipped - returns) ** 2)"
RET = "return 0.5 * kept.sum() / keep.sum()"
MISTAKES = {
    "min_instead_of_max": (edited(BASE, (PER, "per_token = torch.minimum((values - returns) ** 2, (clipped - returns) ** 2)")),
                           ["clip_active_both_sides_B4_T8_c0.2", "clip_mixed_B5_T10_c0.2"]),
    # max(V - R, clip(V) - R)^2: the larger signed error, not the larger squared one
    "max_before_squaring": (edited(BASE, (PER, "per_token = torch.maximum(values - returns, clipped - returns) ** 2")),
                            ["clip_active_both_sides_B4_T8_c0.2", "clip_mixed_B5_T10_c0.2"]),
    # the plain squared error: no clip at all
    "unclipped_term_only": (edited(BASE, (PER, "per_token = (values - returns) ** 2")),
                            ["clip_active_both_sides_B4_T8_c0.2", "cliprange_0.05_mixed_B3_T10"]),
    "clipped_term_only": (edited(BASE, (PER, "per_token = (clipped - returns) ** 2")),
                          ["clip_active_both_sides_B4_T8_c0.2", "clip_mixed_B5_T10_c0.2"]),
    # the clip around the returns, not around the old values: its term is never the larger, so this is the
    # plain squared error (right where the clip is inactive, wrong where it is active)
    "clip_around_the_returns": (edited(BASE, (
        CLIP, "clipped = torch.clamp(values, returns - cliprange_value, returns + cliprange_value)")),
        ["clip_active_both_sides_B4_T8_c0.2", "clip_mixed_B5_T10_c0.2", "cliprange_0.05_mixed_B3_T10"]),
    # V itself clipped to [-c, c]
    "values_clipped_to_plus_minus_c": (edited(BASE, (CLIP, "clipped = torch.clamp(values, -cliprange_value, cliprange_value)")),
                                       ["clip_inactive_B4_T9_c0.2", "first_epoch_values_equal_old_values_B3_T7"]),
    # a relative clip, as the actor's ratio: V_old (1 - c) .. V_old (1 + c)
    "relative_clip_like_the_ratio": (edited(BASE, (
        CLIP, "lo, hi = old_values * (1 - cliprange_value), old_values * (1 + cliprange_value)\n"
              "            clipped = torch.clamp(values, torch.minimum(lo, hi), torch.maximum(lo, hi))")),
        ["clip_mixed_B5_T10_c0.2", "clip_active_both_sides_B4_T8_c0.2"]),
    "half_dropped": (edited(BASE, (RET, "return kept.sum() / keep.sum()")),
                     ["clip_mixed_B5_T10_c0.2", "float64_B4_T8"]),
    # the mask never used: the prompt's and the padding's values in the mean
    "mean_over_all_tokens_ignoring_the_mask": (edited(BASE, (RET, "return 0.5 * per_token.mean()")),
                                               ["masked_out_garbage_1e4_B4_T10", "clip_mixed_B5_T10_c0.2"]),
    # zeros where the mask is 0, then a plain mean: divided by every position
    "mean_counting_the_masked_zeros": (edited(BASE, (RET, "return 0.5 * kept.mean()")),
                                       ["clip_mixed_B5_T10_c0.2", "masked_out_garbage_1e4_B4_T10"]),
    # each response's mean, then the mean over responses (the actor's aggregation)
    "per_row_mean_then_batch_mean": (edited(BASE, (RET, "return 0.5 * (kept.sum(-1) / keep.sum(-1)).mean()")),
                                     ["rows_of_very_different_lengths_B4_T16", "clip_mixed_B5_T10_c0.2"]),
    # each column's mean over the rows (dim=0), then their mean: a square batch runs it without an error
    "per_column_mean": (edited(BASE, (RET, "return 0.5 * (kept.sum(0) / keep.sum(0).clamp(min=1)).mean()")),
                        ["square_B6_T6_c0.2", "rows_of_very_different_lengths_B4_T16"]),
    "sum_instead_of_mean": (edited(BASE, (RET, "return 0.5 * kept.sum()")),
                            ["clip_mixed_B5_T10_c0.2", "T1_B6_c0.2"]),
    # x[mask] with a long or int mask indexes rows, with a float mask it raises
    "indexes_with_the_mask_as_given": ("""
        import torch
        def value_loss(values, old_values, returns, response_mask, cliprange_value):
            v, v_old, r = values[response_mask], old_values[response_mask], returns[response_mask]
            v_clip = torch.clamp(v, v_old - cliprange_value, v_old + cliprange_value)
            return 0.5 * torch.maximum((v - r) ** 2, (v_clip - r) ** 2).mean()
    """, ["long_mask_B3_T9", "int_mask_B3_T7", "float_mask_B3_T9"]),
    "always_float32": (edited(BASE, (CLIP, "values, old_values, returns = values.float(), old_values.float(), returns.float()\n"
                                           "            " + CLIP)),
                       ["float64_B4_T8", "float64_float_mask_garbage_B3_T6"]),
}

test_correct_version_earns_full_marks, test_mistake_loses_its_points = corpus_tests(SUITE, CORRECT, MISTAKES)
test_each_version_holds_on_many_draws = many_draws_test(SUITE, CORRECT, MISTAKES)
