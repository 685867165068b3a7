"""value_loss (notebook 11): the reference's contract. Its correct versions and known mistakes are in
grader.py (tests/test_graded.py runs them through the judge).
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, strategies as st

from course_lib import value_loss
from tests.helpers import PROPERTY_SETTINGS, rand_mask, randn, seeds, shapes


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
