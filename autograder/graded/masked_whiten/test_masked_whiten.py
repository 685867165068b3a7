"""masked_whiten (notebook 11): the reference's contract. Its correct versions and known mistakes are
in grader.py (tests/test_graded.py runs them through the judge).
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, strategies as st

from course_lib import masked_whiten
from tests.helpers import PROPERTY_SETTINGS, rand_mask, randn, seeds, shapes


def whiten_float64(x, mask, shift_mean=True):
    """Independent: the kept entries selected, torch.var_mean (unbiased) in float64, put back in place."""
    keep = mask.bool()
    kept = x.double()[keep]
    var, mean = torch.var_mean(kept, correction=1)
    out = torch.zeros(x.shape, dtype=torch.float64)
    out[keep] = (kept - mean) / torch.sqrt(var + 1e-8) + (0.0 if shift_mean else mean)
    return out


def with_two_kept(shape, seed):
    m = rand_mask(*shape, seed=seed)
    m.view(-1)[:2] = True
    return m


# ---------------------------------------------------------------- the reference
@PROPERTY_SETTINGS
@given(shapes, seeds, st.booleans(), st.sampled_from([torch.float32, torch.float64]),
       st.sampled_from(["bool", "long", "float"]))
def test_reference_matches_float64(shape, seed, shift_mean, dtype, mask_kind):
    if shape[0] * shape[1] * shape[2] < 2:
        shape = (2, *shape[1:])
    x = randn(*shape, seed=seed, dtype=dtype) * 3 + 1
    m = with_two_kept(shape, seed)
    mask = {"bool": m, "long": m.long(), "float": m.to(dtype)}[mask_kind]
    got = masked_whiten(x, mask, shift_mean=shift_mean)
    assert got.shape == x.shape and got.dtype == dtype
    assert torch.equal(got[~m], torch.zeros_like(got[~m]))
    tol = 1e-5 if dtype == torch.float32 else 1e-12
    torch.testing.assert_close(got.double(), whiten_float64(x, m, shift_mean), atol=tol, rtol=tol)


@PROPERTY_SETTINGS
@given(shapes, seeds)
def test_reference_kept_entries_have_mean_0_and_unbiased_variance_about_1(shape, seed):
    if shape[0] * shape[1] * shape[2] < 2:
        shape = (2, *shape[1:])
    x = randn(*shape, seed=seed, dtype=torch.float64) * 5 - 2
    m = with_two_kept(shape, seed)
    if bool((x[m] == x[m][0]).all()):
        return
    kept = masked_whiten(x, m)[m]
    var = x[m].var()
    assert abs(float(kept.mean())) < 1e-9
    torch.testing.assert_close(kept.var(), var / (var + 1e-8))
    # shift_mean=False: the same whitened entries, the input's mean added back
    torch.testing.assert_close(masked_whiten(x, m, shift_mean=False)[m], kept + x[m].mean())


def test_reference_ignores_what_is_under_the_mask():
    x = randn(3, 5, seed=4)
    m = with_two_kept((3, 5), seed=4)
    far = x.clone()
    far[~m] = 1e4
    for shift_mean in (True, False):
        assert torch.equal(masked_whiten(far, m, shift_mean), masked_whiten(x, m, shift_mean))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_reference_constant_values_are_finite(dtype):
    x = torch.full((2, 4), 2.5, dtype=dtype)
    m = torch.tensor([[1, 1, 0, 1], [0, 1, 1, 0]], dtype=torch.bool)
    x[~m] = -7e3
    assert torch.equal(masked_whiten(x, m), torch.zeros(2, 4, dtype=dtype))
    assert torch.equal(masked_whiten(x, m, shift_mean=False), torch.where(m, 2.5, 0.0).to(dtype))


def test_reference_two_entries_are_plus_minus_one_over_root_two():
    got = masked_whiten(torch.tensor([3.0, -1.0, 100.0]), torch.tensor([1, 1, 0]))
    torch.testing.assert_close(got, torch.tensor([2 ** -0.5, -(2 ** -0.5), 0.0]))


def test_reference_eps_is_inside_the_square_root():
    x = torch.tensor([1e-4, -1e-4], dtype=torch.float64)  # unbiased variance 2e-8
    got = masked_whiten(x, torch.ones(2, dtype=torch.bool))
    torch.testing.assert_close(got, x / (2e-8 + 1e-8) ** 0.5)


def test_reference_does_not_modify_its_input():
    x = randn(3, 4, seed=5)
    before = x.clone()
    masked_whiten(x, with_two_kept((3, 4), seed=5), shift_mean=False)
    assert torch.equal(x, before)


@pytest.mark.parametrize("kept", [0, 1])
def test_reference_rejects_fewer_than_two_entries(kept):
    m = torch.zeros(2, 3, dtype=torch.bool)
    m.view(-1)[:kept] = True
    with pytest.raises(ValueError, match="at least 2"):
        masked_whiten(randn(2, 3), m)


def test_reference_rejects_a_mask_of_another_shape():
    with pytest.raises(ValueError, match="values"):
        masked_whiten(torch.zeros(2, 3), torch.ones(3, 2))
