"""log_probs_from_logits (notebook 03, with its `_SelectedLogProb`): the reference's contract. Its
correct versions and known mistakes are in grader.py (tests/test_graded.py runs them through the
judge).
"""

from __future__ import annotations

import torch
from hypothesis import given, strategies as st

from course_lib import log_probs_from_logits, logprobs as logprobs_module
from tests.helpers import PROPERTY_SETTINGS, randn, seeds, shapes


def log_softmax_gather_float64(logits, labels):
    return torch.log_softmax(logits.double(), -1).gather(-1, labels[..., None]).squeeze(-1)


# ---------------------------------------------------------------- the reference
def test_log_probs_gradient_matches_autograd_in_float64(monkeypatch):
    # a tiny chunk forces many chunks, so chunk boundaries are exercised
    monkeypatch.setattr(logprobs_module, "CHUNK_ELEMENTS", 7)
    logits = randn(3, 4, 5, seed=1, dtype=torch.float64, scale=2.0).requires_grad_()
    labels = torch.randint(0, 5, (3, 4), generator=torch.Generator().manual_seed(2))
    assert torch.autograd.gradcheck(lambda x: log_probs_from_logits(x, labels), (logits,))
    weights = randn(3, 4, seed=5, dtype=torch.float64)
    (log_probs_from_logits(logits, labels) * weights).sum().backward()
    ref = logits.detach().clone().requires_grad_()
    (torch.log_softmax(ref, -1).gather(-1, labels[..., None]).squeeze(-1) * weights).sum().backward()
    torch.testing.assert_close(logits.grad, ref.grad)


def test_log_probs_large_logits_finite():
    logits = randn(2, 3, 11, seed=4, scale=1e4)
    labels = torch.randint(0, 11, (2, 3), generator=torch.Generator().manual_seed(0))
    got = log_probs_from_logits(logits, labels)
    assert torch.isfinite(got).all()
    torch.testing.assert_close(got.double(), log_softmax_gather_float64(logits, labels), atol=1e-2, rtol=1e-6)


def test_log_probs_bf16_logits_are_scored_in_float32():
    logits = randn(2, 3, 40, seed=6, scale=4.0).to(torch.bfloat16)
    labels = torch.randint(0, 40, (2, 3), generator=torch.Generator().manual_seed(1))
    got = log_probs_from_logits(logits, labels)
    assert got.dtype == torch.float32
    torch.testing.assert_close(got.double(), log_softmax_gather_float64(logits, labels), atol=1e-5, rtol=1e-5)


@PROPERTY_SETTINGS
@given(shapes, seeds, st.sampled_from([1.0, 5.0]), st.sampled_from([None, 1, 3, 7]))
def test_reference_values_and_onehot_minus_softmax_gradient(shape, seed, scale, rows_per_chunk):
    B, T, V = shape
    logits = randn(B, T, V, seed=seed, scale=scale, dtype=torch.float64).requires_grad_()
    labels = torch.randint(0, V, (B, T), generator=torch.Generator().manual_seed(seed))
    weights = randn(B, T, seed=seed + 1, dtype=torch.float64)
    saved = logprobs_module.CHUNK_ELEMENTS
    logprobs_module.CHUNK_ELEMENTS = saved if rows_per_chunk is None else rows_per_chunk * V
    try:
        out = log_probs_from_logits(logits, labels)
        (out * weights).sum().backward()
    finally:
        logprobs_module.CHUNK_ELEMENTS = saved
    assert out.shape == (B, T) and out.dtype == torch.float64
    torch.testing.assert_close(out, log_softmax_gather_float64(logits.detach(), labels), atol=1e-12, rtol=1e-12)
    onehot = torch.nn.functional.one_hot(labels, V).double()
    expected = weights[..., None] * (onehot - torch.softmax(logits.detach(), -1))
    torch.testing.assert_close(logits.grad, expected, atol=1e-12, rtol=1e-12)


def test_reference_keeps_no_copy_of_the_logits_for_backward():
    logits = randn(4, 64, 2000).requires_grad_()
    labels = torch.randint(0, 2000, (4, 64), generator=torch.Generator().manual_seed(0))
    own, kept = logits.untyped_storage().data_ptr(), []

    def pack(t):
        if t.untyped_storage().data_ptr() != own:
            kept.append(t.untyped_storage().nbytes())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        log_probs_from_logits(logits, labels)
    assert sum(kept) < logits.numel() * logits.element_size() / 8
