"""sft_microbatch_train_step (notebook 04): the reference's contract. Its correct versions and known
mistakes are in grader.py (tests/test_graded.py runs them through the judge).
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, strategies as st

from course_lib import sft_microbatch_train_step
from tests.helpers import PROPERTY_SETTINGS, rand_mask, randn, seeds


# ---------------------------------------------------------------- the reference
@pytest.mark.parametrize("constant", [1.0, 42.0])
@pytest.mark.parametrize("gas", [1, 3])
def test_sft_step_loss_and_gradient(constant, gas):
    logp = (-randn(4, 6, seed=7).abs()).requires_grad_()
    mask = rand_mask(4, 6, seed=7)
    loss, meta = sft_microbatch_train_step(logp, mask, gas, constant)
    expected = (-(logp.detach().double() * mask).sum(-1) / constant).mean() / gas
    assert abs(loss.item() - expected.item()) < 1e-6
    # d loss / d logp[b, t] = -mask / (constant * B * gas)
    torch.testing.assert_close(logp.grad, -mask.float() / (constant * 4 * gas))
    assert meta["response_tokens"].item() == mask.sum().item()


def test_sft_step_accumulates_into_grad():
    logp = (-randn(2, 5, seed=8).abs()).requires_grad_()
    mask = rand_mask(2, 5, seed=8)
    sft_microbatch_train_step(logp, mask, 2, 42.0)
    first = logp.grad.clone()
    sft_microbatch_train_step(logp, mask, 2, 42.0)
    torch.testing.assert_close(logp.grad, 2 * first)


def test_sft_accumulated_micro_batches_equal_the_full_batch_gradient():
    torch.manual_seed(0)
    layer = torch.nn.Linear(5, 7)
    x = torch.randn(8, 3, 5)
    labels = torch.randint(0, 7, (8, 3))
    mask = rand_mask(8, 3, seed=9)

    def logp(xb, lb):
        return torch.log_softmax(layer(xb), -1).gather(-1, lb[..., None]).squeeze(-1)

    sft_microbatch_train_step(logp(x, labels), mask, 1, 42.0)
    full = layer.weight.grad.clone()
    layer.zero_grad()
    for i in range(4):
        sl = slice(2 * i, 2 * i + 2)
        sft_microbatch_train_step(logp(x[sl], labels[sl]), mask[sl], 4, 42.0)
    torch.testing.assert_close(layer.weight.grad, full)


@PROPERTY_SETTINGS
@given(st.integers(1, 5), st.integers(1, 8), seeds, st.integers(1, 5), st.sampled_from([1.0, 42.0, 0.5]),
       st.sampled_from(["bool", "long", "float"]))
def test_reference_loss_gradient_and_metadata(B, T, seed, k, constant, mask_kind):
    values = -randn(B, T, seed=seed, dtype=torch.float64).abs()
    mask = rand_mask(B, T, seed=seed)
    logp = torch.where(mask, values, -torch.inf).requires_grad_()  # -inf on padding must not leak
    loss, meta = sft_microbatch_train_step(logp, mask.to({"bool": torch.bool, "long": torch.long, "float": torch.float}[mask_kind]),
                                           k, constant)
    per_sequence = torch.where(mask, -values, 0.0).sum(-1) / constant
    assert isinstance(loss, torch.Tensor) and loss.dim() == 0 and loss.dtype == torch.float64 and not loss.requires_grad
    torch.testing.assert_close(loss, per_sequence.mean() / k)
    torch.testing.assert_close(meta["nll_per_sequence"], per_sequence)
    torch.testing.assert_close(logp.grad, -mask.double() / (constant * B * k))
