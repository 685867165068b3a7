"""sft_microbatch_train_step (notebook 04): the reference's contract, correct versions that earn
full marks through the real judge, and realistic mistakes that lose them (CONTRIBUTING.md,
"Adding a graded function").

loss = mean_b [ masked sum_t (-log p) / normalize_constant ] / gradient_accumulation_steps,
backpropagated inside (so `.grad` accumulates over the micro-batches) and returned as a tensor."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from autograder.mistakes.sft_microbatch_train_step import MICRO_BASE
from course_lib import sft_microbatch_train_step
from tests.helpers import PROPERTY_SETTINGS, corpus_tests, many_draws_test, rand_mask, randn, seeds

SUITE = "sft_microbatch_train_step"


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


CORRECT = {
    "torch_where_mean": MICRO_BASE,
    # the batch mean written as a sum over B * k
    "masked_fill_sum": """
        import torch
        def sft_microbatch_train_step(policy_log_probs, response_mask, gradient_accumulation_steps, normalize_constant=1.0):
            nll = -policy_log_probs.masked_fill(~response_mask.bool(), 0).sum(-1) / normalize_constant
            scaled = nll.sum() / (nll.shape[0] * gradient_accumulation_steps)
            scaled.backward()
            return scaled.detach(), {"nll_per_sequence": nll.detach(), "response_tokens": response_mask.sum()}
    """,
    # the given masked_normalize of notebook 03, as the notebook suggests
    "given_masked_normalize": """
        from course_lib.masking import masked_normalize
        def sft_microbatch_train_step(policy_log_probs, response_mask, gradient_accumulation_steps, normalize_constant=1.0):
            nll_per_sequence = masked_normalize(-policy_log_probs, response_mask, dim=-1, normalize_constant=normalize_constant)
            loss = nll_per_sequence.mean() / gradient_accumulation_steps
            loss.backward()
            metadata = {"nll_per_sequence": nll_per_sequence.detach(), "response_tokens": response_mask.sum().detach()}
            return loss.detach(), metadata
    """,
    # float64 accumulation, cast back to the log-probs' dtype before backward
    "float64_accumulation": """
        import torch
        def sft_microbatch_train_step(policy_log_probs, response_mask, gradient_accumulation_steps, normalize_constant=1.0):
            kept = torch.where(response_mask.bool(), policy_log_probs.double(), 0.0)
            per_sequence = (-kept.sum(dim=-1) / normalize_constant).to(policy_log_probs.dtype)
            loss = per_sequence.mean() / gradient_accumulation_steps
            loss.backward()
            return loss.detach(), {"nll_per_sequence": per_sequence.detach()}
    """,
    # one sequence at a time, its response tokens picked by boolean indexing
    "row_by_row_boolean_indexing": """
        import torch
        def sft_microbatch_train_step(policy_log_probs, response_mask, gradient_accumulation_steps, normalize_constant=1.0):
            rows = [-lp[m.bool()].sum() / normalize_constant for lp, m in zip(policy_log_probs, response_mask)]
            nll = torch.stack(rows)
            loss = nll.sum() / len(rows) / gradient_accumulation_steps
            loss.backward()
            return loss.detach(), {"nll_per_sequence": nll.detach()}
    """,
}


test_correct_version_earns_full_marks, test_mistake_loses_its_points = corpus_tests(SUITE, CORRECT)
test_each_version_holds_on_many_draws = many_draws_test(SUITE, CORRECT, draws=12)
