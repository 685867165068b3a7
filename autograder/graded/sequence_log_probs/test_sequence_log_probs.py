"""sequence_log_probs (notebook 12): the reference's contract. Its correct versions and known mistakes
are in grader.py (tests/test_graded.py runs them through the judge).
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, strategies as st

from course_lib import sequence_log_probs
from tests.helpers import PROPERTY_SETTINGS, rand_mask, randn, seeds, shapes


class FixedLogits(torch.nn.Module):
    """A module whose forward returns given logits (a parameter, so gradients reach it)."""

    def __init__(self, logits):
        super().__init__()
        self.logits = torch.nn.Parameter(logits.clone())

    def forward(self, input_ids, **kwargs):
        assert input_ids.shape == self.logits.shape[:2]
        return type("Out", (), {"logits": self.logits})()


def draw(shape, seed, dtype=torch.float32):
    """Logits, labels and a mask with at least one response token in every row."""
    B, T, V = shape
    logits = randn(B, T, V, seed=seed, scale=3.0, dtype=dtype)
    labels = torch.randint(0, V, (B, T), generator=torch.Generator().manual_seed(seed))
    mask = rand_mask(B, T, seed=seed)
    mask[torch.arange(B), torch.randint(0, T, (B,), generator=torch.Generator().manual_seed(seed + 7))] = True
    return logits, labels, mask


def sequence_float64(logits, labels, mask, average):
    """Independent: each row's kept tokens selected, log p = logit - logsumexp, in float64."""
    rows = []
    for z, y, m in zip(logits.double(), labels, mask.bool()):
        lp = z[m].gather(-1, y[m][:, None])[:, 0] - torch.logsumexp(z[m], dim=-1)
        rows.append(lp.mean() if average else lp.sum())
    return torch.stack(rows)


# ---------------------------------------------------------------- the reference
@PROPERTY_SETTINGS
@given(shapes, seeds, st.booleans(), st.sampled_from([torch.float32, torch.float64]), st.sampled_from(["bool", "long", "float"]))
def test_reference_matches_float64(shape, seed, average, dtype, mask_kind):
    logits, labels, mask = draw(shape, seed, dtype)
    m = {"bool": mask, "long": mask.long(), "float": mask.to(dtype)}[mask_kind]
    got = sequence_log_probs(FixedLogits(logits), torch.zeros_like(labels), labels, m, average=average)
    assert got.shape == (shape[0],) and got.dtype == dtype
    tol = 1e-5 if dtype == torch.float32 else 1e-12
    torch.testing.assert_close(got.double(), sequence_float64(logits, labels, mask, average), atol=tol, rtol=tol)


@PROPERTY_SETTINGS
@given(shapes, seeds)
def test_reference_default_is_the_sum_and_average_divides_by_each_rows_count(shape, seed):
    logits, labels, mask = draw(shape, seed, torch.float64)
    model, ids = FixedLogits(logits), torch.zeros_like(labels)
    total = sequence_log_probs(model, ids, labels, mask)
    assert torch.equal(total, sequence_log_probs(model, ids, labels, mask, average=False))
    torch.testing.assert_close(sequence_log_probs(model, ids, labels, mask, average=True), total / mask.sum(-1))


@PROPERTY_SETTINGS
@given(shapes, seeds, st.booleans())
def test_reference_gradient_is_the_masked_onehot_minus_softmax(shape, seed, average):
    logits, labels, mask = draw(shape, seed, torch.float64)
    model = FixedLogits(logits)
    weights = randn(shape[0], seed=seed + 3, dtype=torch.float64)
    (sequence_log_probs(model, torch.zeros_like(labels), labels, mask, average=average) * weights).sum().backward()
    per_row = weights / mask.sum(-1) if average else weights
    onehot = torch.nn.functional.one_hot(labels, shape[2]).double()
    expected = (per_row[:, None] * mask)[..., None] * (onehot - torch.softmax(logits, -1))
    torch.testing.assert_close(model.logits.grad, expected)


def test_reference_ignores_what_the_mask_hides():
    logits, labels, mask = draw((3, 7, 11), 5)
    base = sequence_log_probs(FixedLogits(logits), torch.zeros_like(labels), labels, mask)
    far, other = logits.clone(), labels.clone()
    far[~mask] = 1e4 * torch.sign(randn(3, 7, 11, seed=9))[~mask]  # prompt / padding logits of magnitude 1e4
    other[~mask] = (labels[~mask] + 1) % 11
    assert torch.equal(sequence_log_probs(FixedLogits(far), torch.zeros_like(labels), other, mask), base)


def test_reference_prompt_tokens_do_not_count():
    # one row, prompt label positions 0..2, response 3..4: only the last two log-probs are summed
    logits, labels, _ = draw((1, 5, 6), 2, torch.float64)
    mask = torch.tensor([[False, False, False, True, True]])
    lp = torch.log_softmax(logits, -1).gather(-1, labels[..., None])[..., 0]
    torch.testing.assert_close(sequence_log_probs(FixedLogits(logits), torch.zeros_like(labels), labels, mask),
                               lp[:, 3:].sum(-1))


def test_reference_float32_at_least():
    logits, labels, mask = draw((2, 4, 9), 1, torch.bfloat16)
    got = sequence_log_probs(FixedLogits(logits), torch.zeros_like(labels), labels, mask)
    assert got.dtype == torch.float32


def test_reference_rejects_an_empty_row_and_a_mask_of_another_shape():
    logits, labels, mask = draw((3, 6, 5), 4)
    model, ids = FixedLogits(logits), torch.zeros_like(labels)
    empty = mask.clone()
    empty[2] = False
    with pytest.raises(ValueError, match="row 2"):
        sequence_log_probs(model, ids, labels, empty)
    with pytest.raises(ValueError, match="response_mask"):
        sequence_log_probs(model, ids, labels, mask[0])  # (T,): torch would broadcast it
    with pytest.raises(ValueError, match="response_mask"):
        sequence_log_probs(model, ids, labels, mask[:, :-1])
