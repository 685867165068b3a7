"""token_level_rewards (notebook 11): the reference's contract, correct versions that earn full marks
through the real judge, and realistic mistakes that lose them (CONTRIBUTING.md, "Adding a graded
function")."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from autograder.mistakes.token_level_rewards import ARGMAX, CUMSUM, LOOP_OVER_ROWS
from course_lib import token_level_rewards
from tests.helpers import (PROPERTY_SETTINGS, corpus_tests, many_draws_test, mask_of, randn,
                           response_runs, seeds, with_garbage)

SUITE = "token_level_rewards"


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


# ---------------------------------------------------------------- correct versions and mistakes
CORRECT = {
    # the last 1 is the first 1 of the flipped row; rows without a response are left out of the assignment
    "argmax_on_the_flipped_mask": ARGMAX,
    # the position where the running count reaches the row's count, on a response token
    "cumsum_equals_sum": CUMSUM,
    "loop_over_rows": LOOP_OVER_ROWS,
    # the largest masked position (-1 for an empty row), then a scatter of the scores
    "scatter_at_the_largest_masked_position": """
        import torch
        def token_level_rewards(scores, response_mask, kl=None, kl_coef=0.0):
            mask = response_mask != 0
            positions = torch.arange(mask.shape[-1]).expand_as(mask)
            last = torch.where(mask, positions, -1).max(dim=-1).values
            has = last >= 0
            out_dtype = scores.dtype if kl is None else torch.result_type(scores, kl)
            values = torch.where(has, scores, torch.zeros_like(scores)).to(out_dtype)
            rewards = torch.zeros(mask.shape, dtype=out_dtype).scatter(1, last.clamp(min=0).unsqueeze(1),
                                                                       values.unsqueeze(1))
            if kl is not None:
                rewards = rewards - kl_coef * kl.masked_fill(~mask, 0)
            return rewards
    """,
    # the end of the run (a 1 followed by a 0 or by the end of the row), in float64, cast back
    "float64_inside_end_of_run": """
        import torch
        def token_level_rewards(scores, response_mask, kl=None, kl_coef=0.0):
            out_dtype = scores.dtype if kl is None else torch.promote_types(scores.dtype, kl.dtype)
            m = response_mask.double()
            next_m = torch.cat([m[:, 1:], torch.zeros_like(m[:, :1])], dim=1)
            is_last = m * (1 - next_m)
            r = is_last * scores.double()[:, None]
            if kl is not None:
                r = r - kl_coef * torch.where(m > 0, kl.double(), 0.0)
            return r.to(out_dtype)
    """,
}


test_correct_version_earns_full_marks, test_mistake_loses_its_points = corpus_tests(SUITE, CORRECT)
test_each_version_holds_on_many_draws = many_draws_test(SUITE, CORRECT)
