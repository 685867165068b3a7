"""approx_kl (notebook 10): the reference's contract. Its correct versions and known mistakes are in
grader.py (tests/test_graded.py runs them through the judge).
"""

from __future__ import annotations

import pytest
import re
import torch
from hypothesis import given, strategies as st

from autograder.graded.approx_kl.grader import CORRECT
from autograder.mistakes import catalogue
from course_lib import approx_kl
from tests.helpers import fn_from, PROPERTY_SETTINGS, rand_mask, randn, seeds, shapes, visible_check


SUITE = "approx_kl"


def approx_kl_float64(new, old, mask):
    """Independent: the mean over the kept tokens, by boolean selection, in float64."""
    keep = mask.bool()
    d = new.double()[keep] - old.double()[keep]
    return 0.5 * (d * d).sum() / max(int(keep.sum()), 1)


# ---------------------------------------------------------------- the reference
@PROPERTY_SETTINGS
@given(shapes, seeds, st.sampled_from([torch.float32, torch.float64]), st.sampled_from(["bool", "long", "int", "float"]))
def test_reference_matches_float64(shape, seed, dtype, mask_kind):
    new, old = randn(*shape, seed=seed, dtype=dtype) - 1, randn(*shape, seed=seed + 7, dtype=dtype) - 1
    m = rand_mask(*shape, seed=seed)
    mask = {"bool": m, "long": m.long(), "int": m.int(), "float": m.to(dtype)}[mask_kind]
    got = approx_kl(new, old, mask)
    assert got.shape == () and got.dtype == dtype
    torch.testing.assert_close(got.double(), approx_kl_float64(new, old, m), atol=1e-12, rtol=1e-6)


@pytest.mark.parametrize("mask_dtype", [torch.bool, torch.long, torch.float32])
def test_reference_all_zero_mask_gives_0(mask_dtype):
    new, old = randn(3, 4, seed=1), randn(3, 4, seed=2)
    got = approx_kl(new, old, torch.zeros(3, 4, dtype=mask_dtype))
    assert got.item() == 0.0 and not torch.isnan(got)


def test_reference_weighs_every_token_the_same_whatever_its_rows_length():
    new = torch.tensor([[1.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0]])
    old = torch.zeros(2, 4)
    mask = torch.tensor([[1, 0, 0, 0], [1, 1, 1, 1]])
    assert approx_kl(new, old, mask).item() == 0.5  # five tokens of 0.5; the mean of row means also is 0.5
    new[1] = 0.0
    assert approx_kl(new, old, mask).item() == pytest.approx(0.1)  # one token of 0.5 in five (row means: 0.25)


def test_reference_ignores_large_values_under_the_mask():
    new, old = randn(2, 5, seed=3), randn(2, 5, seed=4)
    mask = torch.tensor([[1, 1, 0, 0, 0], [1, 1, 1, 0, 1]], dtype=torch.bool)
    far = new.clone()
    far[~mask] = -1e4
    assert torch.equal(approx_kl(far, old, mask), approx_kl(new, old, mask))


@PROPERTY_SETTINGS
@given(shapes, seeds)
def test_reference_gradient_is_the_masked_difference_over_the_count(shape, seed):
    new = randn(*shape, seed=seed, dtype=torch.float64).requires_grad_()
    old = randn(*shape, seed=seed + 3, dtype=torch.float64).requires_grad_()
    m = rand_mask(*shape, seed=seed)
    approx_kl(new, old, m).backward()
    expected = (new.detach() - old.detach()) * m / max(int(m.sum()), 1)
    torch.testing.assert_close(new.grad, expected)
    torch.testing.assert_close(old.grad, -expected)


def test_reference_rejects_bad_inputs():
    x = torch.zeros(2, 3)
    with pytest.raises(ValueError, match="old_log_probs"):
        approx_kl(x, torch.zeros(3, 2), torch.ones(2, 3))
    with pytest.raises(ValueError, match="response_mask"):
        approx_kl(x, x, torch.ones(2, 4))
    with pytest.raises(ValueError, match="response_mask"):
        approx_kl(x, x, torch.full((2, 3), 2))


# ---------------------------------------------------------------- the notebook's visible checks
# what the visible self-check of lessons/10_kl_estimators.py says about each mistake (a phrase of its message)
VISIBLE_MESSAGES = {
    "mask_ignored": "every position entered the mean (9.89)",
    "indexes_with_the_mask_as_given": "every position entered the mean (9.89)",  # an integer mask indexes rows
    "mean_over_all_positions": "you divided the masked sum by every position (0.141)",
    "mean_of_per_row_means": "a mean of per-row means, 0.354",
    "half_dropped": "you left out the 1/2 (0.5625)",
    "nan_on_an_all_zero_mask": "an all-zero mask must give 0, not NaN",
}
# stopped by the comparison with the value by hand, whose message states the formula
STOPPED_UNNAMED = {"k1_mean_log_ratio", "k3_instead_of_k2"}
NOT_VISIBLE = {"always_float32"}  # the visible checks are float32; the hidden cases hold the float64 ones


@pytest.mark.slow  # 11 s under a load average of 15 on 2 cores: notebook 10's cells before the check run first
def test_the_notebooks_visible_checks_name_each_mistake(monkeypatch):
    """The visible checks of notebook 10's approx_kl cell, built from the lesson as the solution notebook
    is (run as while grading, the hidden check left out), pass every correct version and stop each
    catalogued mistake they can see, with the message that names it where one does."""
    mistakes = catalogue(SUITE)
    assert set(VISIBLE_MESSAGES) | STOPPED_UNNAMED | NOT_VISIBLE == set(mistakes)
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    namespace, visible = visible_check("10_kl_estimators.py", "approx_kl")
    for source in CORRECT.values():
        exec(visible, {**namespace, "approx_kl": fn_from(source, "approx_kl")})
    for mistake, phrase in VISIBLE_MESSAGES.items():
        with pytest.raises(AssertionError, match=re.escape(phrase)):
            exec(visible, {**namespace, "approx_kl": fn_from(mistakes[mistake].source, "approx_kl")})
    for mistake in STOPPED_UNNAMED:
        with pytest.raises(AssertionError, match=re.escape("approx_kl = sum(0.5 * (logp - logp_old)^2 * mask)")):
            exec(visible, {**namespace, "approx_kl": fn_from(mistakes[mistake].source, "approx_kl")})
