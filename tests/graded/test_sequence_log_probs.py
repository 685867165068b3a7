"""sequence_log_probs (notebook 12): the reference's contract, correct versions that earn full marks
through the real judge, and realistic mistakes that lose them (CONTRIBUTING.md, "Adding a graded
function").

Every version brings its own per-token log-probs: in the judge the earlier notebooks' graded
functions may be stubs, so none of them is called here."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from autograder.mistakes.sequence_log_probs import BASE
from course_lib import sequence_log_probs
from tests.helpers import PROPERTY_SETTINGS, corpus_tests, many_draws_test, rand_mask, randn, seeds, shapes

SUITE = "sequence_log_probs"


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


CORRECT = {
    "log_softmax_gather_where": BASE,
    # per-token cross-entropy, the mask multiplied in (the masked log-probs are finite)
    "cross_entropy_times_mask": """
        import torch
        import torch.nn.functional as F
        def sequence_log_probs(model, input_ids, labels, response_mask, average=False):
            if tuple(response_mask.shape) != tuple(labels.shape):
                raise ValueError(f"response_mask {tuple(response_mask.shape)} vs labels {tuple(labels.shape)}")
            logits = model(input_ids).logits
            z = logits.to(torch.promote_types(logits.dtype, torch.float32))
            nll = F.cross_entropy(z.reshape(-1, z.shape[-1]), labels.reshape(-1), reduction="none").view(labels.shape)
            m = response_mask.to(nll.dtype)
            n = m.sum(dim=1)
            if (n == 0).any():
                raise ValueError("empty response")
            total = -(nll * m).sum(dim=1)
            if average:
                return total / n
            return total
    """,
    # one row at a time, its response tokens selected, logit minus logsumexp
    "loop_over_rows_logsumexp": """
        import torch
        def sequence_log_probs(model, input_ids, labels, response_mask, average=False):
            if response_mask.dim() != labels.dim() or response_mask.shape != labels.shape:
                raise ValueError("response_mask and labels differ in shape")
            if not all(bool(row.any()) for row in response_mask.bool()):
                raise ValueError("a response is empty")
            logits = model(input_ids).logits
            if logits.dtype not in (torch.float32, torch.float64):
                logits = logits.float()
            rows = []
            for z, y, m in zip(logits, labels, response_mask.bool()):
                z, y = z[m], y[m]
                lp = z[torch.arange(len(y)), y] - torch.logsumexp(z, dim=-1)
                rows.append(lp.mean() if average else lp.sum())
            return torch.stack(rows)
    """,
    # float64 log-softmax, masked_fill, cast back to the output dtype
    "float64_inside_masked_fill": """
        import torch
        def sequence_log_probs(model, input_ids, labels, response_mask, average=False):
            if response_mask.shape != labels.shape:
                raise ValueError("bad response_mask shape")
            mask = response_mask != 0
            lengths = mask.sum(-1)
            if lengths.min() < 1:
                raise ValueError("row with no response token")
            logits = model(input_ids).logits
            out_dtype = torch.promote_types(logits.dtype, torch.float32)
            lp = torch.log_softmax(logits.double(), dim=-1).gather(2, labels[:, :, None])[:, :, 0]
            total = lp.masked_fill(~mask, 0.0).sum(-1)
            if average:
                total = total / lengths.double()
            return total.to(out_dtype)
    """,
    # notebook 03's released get_response_log_probs and 04's masked_normalize (open to notebook 12)
    "earlier_notebooks_functions": """
        import torch
        from course_lib import get_response_log_probs, masked_normalize
        def sequence_log_probs(model, input_ids, labels, response_mask, average=False):
            if response_mask.shape != labels.shape:
                raise ValueError("response_mask and labels must have one shape")
            counts = response_mask.sum(-1)
            if bool((counts == 0).any()):
                raise ValueError("a row has no response token")
            lp = get_response_log_probs(model, input_ids, labels)["log_probs"]
            total = masked_normalize(lp, response_mask.bool(), dim=-1)
            return total / counts.to(total.dtype) if average else total
    """,
}


test_correct_version_earns_full_marks, test_mistake_loses_its_points = corpus_tests(SUITE, CORRECT)
test_each_version_holds_on_many_draws = many_draws_test(SUITE, CORRECT, draws=10)
