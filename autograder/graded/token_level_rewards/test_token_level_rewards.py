"""token_level_rewards (notebook 11): the reference's contract. Its correct versions and known mistakes
are in grader.py (tests/test_graded.py runs them through the judge).
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, strategies as st

from course_lib import token_level_rewards
from tests.helpers import mask_of, PROPERTY_SETTINGS, randn, response_runs, seeds, with_garbage


def rewards_by_loop(scores, mask, kl, kl_coef):
    """Independent: float64, row by row, from the definition."""
    out = torch.zeros(mask.shape, dtype=torch.float64)
    for b in range(mask.shape[0]):
        cols = [t for t in range(mask.shape[1]) if mask[b, t]]
        if cols:
            out[b, cols[-1]] += float(scores[b])
        if kl is not None:
            for t in cols:
                out[b, t] -= kl_coef * float(kl[b, t])
    return out


# ---------------------------------------------------------------- the reference
@PROPERTY_SETTINGS
@given(response_runs(), seeds, st.sampled_from([None, 0.0, 0.1, 1.0]), st.sampled_from([torch.float32, torch.float64]),
       st.sampled_from(["bool", "long", "float"]))
def test_reference_matches_a_loop_over_rows(run, seed, kl_coef, dtype, mask_kind):
    T, spans = run
    mask = mask_of(T, spans)
    scores = randn(len(spans), seed=seed, dtype=dtype)
    kl = None if kl_coef is None else with_garbage(randn(*mask.shape, seed=seed + 1, dtype=dtype), mask, seed)
    mk = {"bool": mask, "long": mask.long(), "float": mask.to(dtype)}[mask_kind]
    got = token_level_rewards(scores, mk) if kl is None else token_level_rewards(scores, mk, kl=kl, kl_coef=kl_coef)
    assert got.shape == mask.shape and got.dtype == dtype
    expected = rewards_by_loop(scores, mask, kl, kl_coef or 0.0)
    torch.testing.assert_close(got.double(), expected, atol=4 * torch.finfo(dtype).eps * 60, rtol=0.0)
    assert (got[~mask] == 0).all()


@PROPERTY_SETTINGS
@given(response_runs(), seeds, st.sampled_from([0.0, 0.05, 0.3]))
def test_reference_row_sum_is_the_score_minus_kl_coef_times_the_masked_kl_sum(run, seed, kl_coef):
    T, spans = run
    mask = mask_of(T, spans)
    scores = randn(len(spans), seed=seed, dtype=torch.float64)
    kl = with_garbage(randn(*mask.shape, seed=seed + 1, dtype=torch.float64), mask, seed)
    got = token_level_rewards(scores, mask, kl=kl, kl_coef=kl_coef)
    expected = torch.where(mask.any(-1), scores, 0.0) - kl_coef * torch.where(mask, kl, 0.0).sum(-1)
    torch.testing.assert_close(got.sum(-1), expected)


@PROPERTY_SETTINGS
@given(response_runs(), seeds)
def test_reference_puts_the_score_on_the_last_response_position_only(run, seed):
    T, spans = run
    mask = mask_of(T, spans)
    scores = randn(len(spans), seed=seed).abs() + 0.5  # nonzero
    got = token_level_rewards(scores, mask)
    for b, (start, n) in enumerate(spans):
        nonzero = got[b].nonzero().flatten().tolist()
        assert nonzero == ([start + n - 1] if n else [])
        if n:
            assert got[b, start + n - 1] == scores[b]


@PROPERTY_SETTINGS
@given(response_runs(), seeds)
def test_reference_never_reads_kl_outside_the_response(run, seed):
    T, spans = run
    mask = mask_of(T, spans)
    scores = randn(len(spans), seed=seed)
    kl = randn(*mask.shape, seed=seed + 1)
    clean = torch.where(mask, kl, 0.0)
    assert torch.equal(token_level_rewards(scores, mask, kl=with_garbage(kl, mask, seed), kl_coef=0.1),
                       token_level_rewards(scores, mask, kl=clean, kl_coef=0.1))


def test_reference_empty_row_is_all_zero_and_the_prompt_offset_counts():
    mask = torch.tensor([[0, 0, 1, 1, 0], [0, 0, 0, 0, 0], [1, 1, 1, 1, 1]])
    got = token_level_rewards(torch.tensor([2.0, 3.0, -1.0]), mask)
    assert got.tolist() == [[0, 0, 0, 2.0, 0], [0, 0, 0, 0, 0], [0, 0, 0, 0, -1.0]]


@pytest.mark.parametrize(("scores_dtype", "kl_dtype", "expected"), [
    (torch.float32, None, torch.float32), (torch.float64, None, torch.float64),
    (torch.float32, torch.float64, torch.float64), (torch.float64, torch.float32, torch.float64),
    (torch.float32, torch.float32, torch.float32)])
def test_reference_dtype_is_the_scores_promoted_with_kl(scores_dtype, kl_dtype, expected):
    mask = torch.tensor([[1, 1, 0], [0, 1, 1]])
    kl = None if kl_dtype is None else torch.ones(2, 3, dtype=kl_dtype)
    assert token_level_rewards(torch.ones(2, dtype=scores_dtype), mask, kl=kl, kl_coef=0.1).dtype == expected


def test_reference_leaves_its_inputs_unchanged_and_detached():
    mask = torch.tensor([[0, 1, 1, 0]])
    scores, kl = torch.tensor([1.0], requires_grad=True), torch.full((1, 4), 9.0, requires_grad=True)
    before = kl.detach().clone()
    got = token_level_rewards(scores, mask, kl=kl, kl_coef=0.5)
    assert not got.requires_grad and torch.equal(kl.detach(), before)
    assert got.tolist() == [[0.0, -4.5, -3.5, 0.0]]


def test_reference_rejects_bad_shapes():
    with pytest.raises(ValueError, match="scores"):
        token_level_rewards(torch.zeros(3), torch.ones(2, 4))
    with pytest.raises(ValueError, match="kl"):
        token_level_rewards(torch.zeros(2), torch.ones(2, 4), kl=torch.zeros(2, 5))
