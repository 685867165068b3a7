"""log_probs_from_logits (notebook 03, with its `_SelectedLogProb`): the reference's contract,
correct versions that earn full marks through the real judge, and realistic mistakes that lose
them (CONTRIBUTING.md, "Adding a graded function").

A student's cell sits under the notebook's given `CHUNK_ELEMENTS`, `_row_chunks` and `_float`,
so every version below defines them as the notebook does; the suite sets `CHUNK_ELEMENTS` in the
function's globals for its chunk cases."""

from __future__ import annotations

import torch
from hypothesis import given
from hypothesis import strategies as st

from autograder.mistakes.log_probs_from_logits import GIVEN, REFERENCE
from course_lib import log_probs_from_logits
from course_lib import logprobs as logprobs_module
from tests.helpers import PROPERTY_SETTINGS, corpus_tests, many_draws_test, randn, seeds, shapes

SUITE = "log_probs_from_logits"


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


CORRECT = {
    # -g * exp(z - lse), then + g at the label (scatter_add_)
    "exp_form_as_the_reference": REFERENCE,
    # the notebook's formula written out: g * (onehot - softmax), the softmax recomputed per chunk
    "onehot_minus_softmax": GIVEN + """
    import torch.nn.functional as F
    class _SelectedLogProb(torch.autograd.Function):
        @staticmethod
        def forward(ctx, logits, labels):
            rows = _row_chunks(*logits.shape)
            lse = torch.cat([torch.logsumexp(_float(c), dim=-1) for c in logits.split(rows)])
            picked = _float(logits.gather(-1, labels[:, None]).squeeze(-1))
            ctx.save_for_backward(logits, labels, lse)
            return picked - lse
        @staticmethod
        def backward(ctx, grad_out):
            logits, labels, lse = ctx.saved_tensors
            n, v = logits.shape
            rows = _row_chunks(n, v)
            grad = torch.empty_like(logits)
            for start in range(0, n, rows):
                z = _float(logits[start:start + rows])
                probs = torch.softmax(z, dim=-1)
                onehot = F.one_hot(labels[start:start + rows], v).to(probs.dtype)
                grad[start:start + rows] = (grad_out[start:start + rows, None] * (onehot - probs)).to(grad.dtype)
            return grad, None
    def log_probs_from_logits(logits, labels):
        B, T, V = logits.shape
        flat = _SelectedLogProb.apply(logits.reshape(-1, V), labels.reshape(-1))
        return flat.reshape(B, T)
    """,
    # saves only the logits and labels; backward recomputes each chunk's logsumexp
    "recompute_lse_in_backward": GIVEN + """
    class _SelectedLogProb(torch.autograd.Function):
        @staticmethod
        def forward(ctx, logits, labels):
            rows = _row_chunks(*logits.shape)
            out = []
            for c, y in zip(logits.split(rows), labels.split(rows)):
                c = _float(c)
                out.append(c.gather(-1, y[:, None])[:, 0] - torch.logsumexp(c, dim=-1))
            ctx.save_for_backward(logits, labels)
            return torch.cat(out)
        @staticmethod
        def backward(ctx, grad_out):
            logits, labels = ctx.saved_tensors
            rows = _row_chunks(*logits.shape)
            grads = []
            for c, y, g in zip(logits.split(rows), labels.split(rows), grad_out.split(rows)):
                c = _float(c)
                d = -g[:, None] * torch.exp(c - torch.logsumexp(c, dim=-1, keepdim=True))
                d[torch.arange(len(y)), y] += g.to(d.dtype)
                grads.append(d.to(logits.dtype))
            return torch.cat(grads), None
    def log_probs_from_logits(logits, labels):
        b, t, v = logits.shape
        return _SelectedLogProb.apply(logits.reshape(b * t, v), labels.reshape(b * t)).view(b, t)
    """,
    # no chunks at all: what autograd keeps is still only the logits, labels and (N,) lse (the
    # forward's temporaries are larger, which the notebook's memory cell shows, not the contract)
    "unchunked_custom_function": GIVEN + """
    class _SelectedLogProb(torch.autograd.Function):
        @staticmethod
        def forward(ctx, logits, labels):
            z = _float(logits)
            lse = torch.logsumexp(z, dim=-1)
            ctx.save_for_backward(logits, labels, lse)
            return z.gather(1, labels.unsqueeze(1)).squeeze(1) - lse
        @staticmethod
        def backward(ctx, grad_out):
            logits, labels, lse = ctx.saved_tensors
            p = torch.exp(_float(logits) - lse.unsqueeze(1))
            grad = -grad_out.unsqueeze(1) * p
            grad[torch.arange(logits.shape[0]), labels] += grad_out.to(grad.dtype)
            return grad.to(logits.dtype), None
    def log_probs_from_logits(logits, labels):
        shape = labels.shape
        return _SelectedLogProb.apply(logits.flatten(0, 1), labels.flatten()).view(shape)
    """,
    # float64 inside each chunk, cast back to the float32-at-least dtype
    "float64_inside": GIVEN + """
    class _SelectedLogProb(torch.autograd.Function):
        @staticmethod
        def forward(ctx, logits, labels):
            out_dtype = _float(logits[:1]).dtype
            rows = _row_chunks(*logits.shape)
            lse = torch.cat([torch.logsumexp(c.double(), dim=-1) for c in logits.split(rows)])
            picked = logits.gather(-1, labels[:, None]).squeeze(-1).double()
            ctx.save_for_backward(logits, labels, lse)
            return (picked - lse).to(out_dtype)
        @staticmethod
        def backward(ctx, grad_out):
            logits, labels, lse = ctx.saved_tensors
            rows = _row_chunks(*logits.shape)
            grad = torch.empty_like(logits)
            for start in range(0, logits.shape[0], rows):
                sl = slice(start, start + rows)
                g = grad_out[sl].double()
                chunk = -g[:, None] * torch.exp(logits[sl].double() - lse[sl, None])
                chunk.scatter_add_(-1, labels[sl, None], g[:, None])
                grad[sl] = chunk.to(grad.dtype)
            return grad, None
    def log_probs_from_logits(logits, labels):
        b, t, v = logits.shape
        return _SelectedLogProb.apply(logits.reshape(b * t, v), labels.reshape(-1)).view(b, t)
    """,
}


test_correct_version_earns_full_marks, test_mistake_loses_its_points = corpus_tests(SUITE, CORRECT)
test_each_version_holds_on_many_draws = many_draws_test(SUITE, CORRECT, draws=12)
