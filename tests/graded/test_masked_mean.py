"""masked_mean (notebook 07): the reference's contract, correct versions that earn full marks through
the real judge, and realistic mistakes that lose them (CONTRIBUTING.md, "Adding a graded function")."""

from __future__ import annotations

import math

import torch
from hypothesis import given
from hypothesis import strategies as st

from course_lib import masked_mean
from tests.helpers import PROPERTY_SETTINGS, corpus_tests, many_draws_test, rand_mask, randn, seeds, shapes

SUITE = "masked_mean"


# ---------------------------------------------------------------- the reference
@PROPERTY_SETTINGS
@given(shapes, seeds, st.sampled_from([None, 0, 1, -1]))
def test_reference_matches_float64(shape, seed, dim):
    x = randn(*shape, seed=seed)
    m = rand_mask(*shape, seed=seed)
    got = masked_mean(x, m, dim=dim)
    xs, md = x.double() * m.double(), m.double()
    expected = xs.sum() / md.sum() if dim is None else xs.sum(dim) / md.sum(dim)
    torch.testing.assert_close(got.double(), expected, atol=1e-6, rtol=1e-6, equal_nan=True)
    assert got.dtype == x.dtype


def test_reference_empty_mask_gives_nan():
    x = randn(2, 3)
    empty = torch.zeros(2, 3, dtype=torch.bool)
    assert torch.isnan(masked_mean(x, empty)).item()
    assert torch.isnan(masked_mean(x, empty, dim=1)).all()


def test_reference_ignores_non_finite_values_under_the_mask():
    x = torch.tensor([[1.0, -math.inf, 3.0, math.nan]])
    m = torch.tensor([[1, 0, 1, 0]])
    assert masked_mean(x, m).item() == 2.0
    assert masked_mean(x, m, dim=-1).tolist() == [2.0]


def test_reference_accepts_float_and_int_masks():
    x = randn(3, 4, seed=2)
    mb = rand_mask(3, 4, seed=2)
    for m in (mb.float(), mb.long(), mb.int()):
        assert torch.equal(masked_mean(x, m, dim=0), masked_mean(x, mb, dim=0))
        assert torch.equal(masked_mean(x, m), masked_mean(x, mb))


@PROPERTY_SETTINGS
@given(shapes, seeds)
def test_reference_gradient_is_the_mask_over_the_count(shape, seed):
    x = randn(*shape, seed=seed).requires_grad_()
    m = rand_mask(*shape, seed=seed)
    m[..., 0] = True
    masked_mean(x, m, dim=-1).sum().backward()
    torch.testing.assert_close(x.grad, m.float() / m.float().sum(-1, keepdim=True))


# ---------------------------------------------------------------- correct versions and mistakes
CORRECT = {
    "where_sum_over_count": """
        import torch
        def masked_mean(tensor, mask, dim=None):
            kept = torch.where(mask.bool(), tensor, torch.zeros_like(tensor))
            count = mask.to(tensor.dtype)
            if dim is None:
                return kept.sum() / count.sum()
            return kept.sum(dim=dim) / count.sum(dim=dim)
    """,
    # NaN in the masked-out places, then the mean of what is left (nanmean: 0/0 = NaN for an empty row)
    "nanmean_over_kept_elements": """
        import torch
        def masked_mean(tensor, mask, dim=None):
            kept = torch.where(mask.bool(), tensor, torch.full_like(tensor, float("nan")))
            return kept.nanmean() if dim is None else kept.nanmean(dim=dim)
    """,
    "masked_fill_and_mask_sum": """
        import torch
        def masked_mean(tensor, mask, dim=None):
            keep = mask != 0
            total = tensor.masked_fill(~keep, 0.0).sum(dim=dim)
            return total / keep.sum(dim=dim)
    """,
    "float64_accumulation": """
        import torch
        def masked_mean(tensor, mask, dim=None):
            m = mask.bool()
            x = torch.where(m, tensor.double(), 0.0)
            n = m.double()
            out = x.sum() / n.sum() if dim is None else x.sum(dim) / n.sum(dim)
            return out.to(tensor.dtype)
    """,
    # boolean indexing, row by row: the mean of each row's kept entries (an empty row's mean is NaN)
    "loop_over_rows": """
        import torch
        def masked_mean(tensor, mask, dim=None):
            mask = mask.bool().expand_as(tensor)
            if dim is None:
                return tensor[mask].mean()
            x, m = tensor.movedim(dim, -1), mask.movedim(dim, -1)
            rows = [row[keep].mean() for row, keep in zip(x.reshape(-1, x.shape[-1]), m.reshape(-1, m.shape[-1]))]
            return torch.stack(rows).reshape(x.shape[:-1]) if rows else x.sum(-1)
    """,
}


# catalogued mistakes written another way: recognition is about what a function does, not its text
SAME_MISTAKES = {
    # the plain mean of the zero-filled tensor, summed in float64 and divided by the entry count
    "entry_count_in_float64": ("mean_including_the_masked_zeros", """
        import torch
        def masked_mean(tensor, mask, dim=None):
            kept = torch.where(mask.bool(), tensor.double(), 0.0)
            n = kept.numel() if dim is None else kept.shape[dim]
            total = kept.sum() if dim is None else kept.sum(dim=dim)
            return (total / n).to(tensor.dtype)
    """),
    # 0 for an empty slice chosen by torch.where instead of a clamped count
    "zero_where_the_count_is_0": ("masked_mean_zero_for_an_empty_row", """
        import torch
        def masked_mean(tensor, mask, dim=None):
            m = mask.bool()
            kept = torch.where(m, tensor, torch.zeros_like(tensor))
            total, count = (kept.sum(), m.sum()) if dim is None else (kept.sum(dim), m.sum(dim))
            return torch.where(count == 0, torch.zeros_like(total), total / count)
    """),
}

test_correct_version_earns_full_marks, test_mistake_loses_its_points = corpus_tests(SUITE, CORRECT, SAME_MISTAKES)
test_each_version_holds_on_many_draws = many_draws_test(SUITE, CORRECT, same_mistakes=SAME_MISTAKES)
