"""get_response_log_probs (notebook 03): the reference's contract. Its correct versions and known
mistakes are in grader.py (tests/test_graded.py runs them through the judge).
"""

from __future__ import annotations

import torch
from hypothesis import given

from course_lib import get_response_log_probs
from tests.helpers import PROPERTY_SETTINGS, randn, seeds, shapes


def entropy_float64(logits):
    """Independent: the definition on float64 probabilities after a max shift."""
    x = logits.double()
    x = x - x.max(dim=-1, keepdim=True).values
    p = x.exp() / x.exp().sum(-1, keepdim=True)
    logp = x - x.exp().sum(-1, keepdim=True).log()
    return -(torch.where(p > 0, p * logp, torch.zeros_like(p))).sum(-1)


class FixedLogits(torch.nn.Module):
    """A real module whose forward returns given logits (a parameter, so gradients reach it)."""

    def __init__(self, logits):
        super().__init__()
        self.logits = torch.nn.Parameter(logits.clone())

    def forward(self, input_ids):
        assert input_ids.shape == self.logits.shape[:2]
        return type("Out", (), {"logits": self.logits})()


# ---------------------------------------------------------------- the reference
@PROPERTY_SETTINGS
@given(shapes, seeds)
def test_log_probs_match_float64_log_softmax(shape, seed):
    B, T, V = shape
    logits = randn(B, T, V, seed=seed, scale=3.0)
    labels = torch.randint(0, V, (B, T), generator=torch.Generator().manual_seed(seed))
    out = get_response_log_probs(FixedLogits(logits), torch.zeros(B, T, dtype=torch.long), labels, True)
    expected = torch.log_softmax(logits.double(), -1).gather(-1, labels[..., None]).squeeze(-1)
    torch.testing.assert_close(out["log_probs"].double(), expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(out["token_entropy"].double(), entropy_float64(logits), atol=1e-5, rtol=1e-5)
    assert out["log_probs"].shape == (B, T)


def test_log_probs_without_entropy_returns_none():
    logits = randn(2, 3, 5)
    out = get_response_log_probs(FixedLogits(logits), torch.zeros(2, 3, dtype=torch.long), torch.zeros(2, 3, dtype=torch.long))
    assert out["token_entropy"] is None


@PROPERTY_SETTINGS
@given(shapes, seeds)
def test_reference_log_probs_carry_the_gradient_and_the_entropy_none(shape, seed):
    B, T, V = shape
    model = FixedLogits(randn(B, T, V, seed=seed, scale=3.0))
    labels = torch.randint(0, V, (B, T), generator=torch.Generator().manual_seed(seed))
    out = get_response_log_probs(model, torch.zeros(B, T, dtype=torch.long), labels, return_token_entropy=True)
    assert set(out) == {"log_probs", "token_entropy"}
    assert out["log_probs"].requires_grad and not out["token_entropy"].requires_grad
    out["log_probs"].sum().backward()
    onehot = torch.nn.functional.one_hot(labels, V).float()
    torch.testing.assert_close(model.logits.grad, onehot - torch.softmax(model.logits.detach(), -1), atol=1e-6, rtol=1e-5)
