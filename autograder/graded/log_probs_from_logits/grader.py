"""The grader's side of `log_probs_from_logits` (notebook 03, with its `_SelectedLogProb`): how its
hidden cases are drawn, the correct versions that must earn full marks and the known mistakes that
must lose them, each with the sentence a student reads (`autograder.mistakes`). Never in a student
kit or the grading sandbox, which hold the folder's __init__.py only.

Hidden cases of `log_probs_from_logits(logits, labels) -> (B, T)` (notebook 03).

Beyond the visible checks: other shapes (T = 1, V = 1, B = 1), labels at both ends of the
vocabulary, float64, bfloat16 and float16 logits (log-probs in float32 at least; float64 stays
float64), logits of magnitude 1e4, enough rows for several chunks of the notebook's
`CHUNK_ELEMENTS` (set small for those cases, 3 or 7 rows per chunk, with a last partial
chunk, wherever the function reads that global), the gradient with respect to the logits
through a weighted sum of the log-probs (float32 and float64), the logits left unchanged, and,
on large logits, what autograd keeps for backward besides the logits: less than an eighth of
their size (a `log_softmax` output or a float32 copy of the logits is a full (B, T, V) tensor),
counting both what `ctx.save_for_backward` saves and any tensor kept as an attribute of `ctx`
(`ctx.probs = ...`), which saved-tensor hooks do not see.

A student's cell sits under the notebook's given `CHUNK_ELEMENTS`, `_row_chunks` and `_float`,
so every version below defines them as the notebook does; the suite sets `CHUNK_ELEMENTS` in the
function's globals for its chunk cases.
"""

from __future__ import annotations

import torch

from autograder.mistakes import edited, Mistake


# ---------------------------------------------------------------- the hidden cases
def make_inputs(gen: torch.Generator) -> list[tuple[str, dict]]:
    def case(B, T, V, scale=3.0, dtype=torch.float32, labels=None, shift=0.0, rows_per_chunk=None):
        logits = (torch.randn(B, T, V, generator=gen, dtype=torch.float64) * scale + shift).to(dtype)
        lab = torch.randint(0, V, (B, T), generator=gen) if labels is None else labels
        chunk = None if rows_per_chunk is None else rows_per_chunk * V + V // 2
        return {"logits": logits, "labels": lab, "weights": torch.randn(B, T, generator=gen), "chunk_elements": chunk,
                "backward": dtype in (torch.float32, torch.float64)}  # low-precision logits: the forward only

    edge = torch.tensor([[0, 12, 12, 0, 5], [12, 0, 1, 11, 12]])
    return [
        ("float32_B2_T5_V11", case(2, 5, 11)),
        ("float64_B3_T4_V7", case(3, 4, 7, dtype=torch.float64)),
        ("bfloat16_B2_T6_V300", case(2, 6, 300, scale=4.0, dtype=torch.bfloat16)),
        ("float16_B2_T3_V129", case(2, 3, 129, dtype=torch.float16)),
        ("T1_B4_V9", case(4, 1, 9)),
        ("V1_B2_T3", case(2, 3, 1)),
        ("B1_T1_V2", case(1, 1, 2)),
        ("labels_at_vocab_edges_V13", case(2, 5, 13, labels=edge)),
        ("magnitude_1e4_B2_T4_V17", case(2, 4, 17, scale=1e4)),
        ("shifted_by_1e4_B2_T3_V50", case(2, 3, 50, scale=2.0, shift=1e4)),
        ("large_vocab_B4_T64_V2000", case(4, 64, 2000)),
        ("chunks_of_3_rows_B2_T5_V11", case(2, 5, 11, rows_per_chunk=3)),
        ("chunks_of_7_rows_B3_T17_V301", case(3, 17, 301, rows_per_chunk=7)),
        ("chunks_of_3_rows_float64_B2_T4_V6", case(2, 4, 6, dtype=torch.float64, rows_per_chunk=3)),
    ]


# ---------------------------------------------------------------- the correct versions
GIVEN = """
    import torch
    CHUNK_ELEMENTS = 1 << 22
    def _row_chunks(n_rows, vocab):
        return max(1, CHUNK_ELEMENTS // max(vocab, 1))
    def _float(x):
        return x if x.dtype in (torch.float32, torch.float64) else x.float()
"""  # the notebook's given cell: the chunk size global and the two helpers

REFERENCE = GIVEN + """
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
            rows = _row_chunks(*logits.shape)
            grad = torch.empty_like(logits)
            for start in range(0, logits.shape[0], rows):
                sl = slice(start, start + rows)
                g = grad_out[sl]
                chunk = -g[:, None] * torch.exp(_float(logits[sl]) - lse[sl, None])
                chunk.scatter_add_(-1, labels[sl, None], g[:, None].to(chunk.dtype))
                grad[sl] = chunk.to(grad.dtype)
            return grad, None
    def log_probs_from_logits(logits, labels):
        b, t, v = logits.shape
        return _SelectedLogProb.apply(logits.reshape(b * t, v), labels.reshape(-1)).view(b, t)
"""


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

# the fresh draws of the cases the many-draws check holds every version to (tests/test_graded.py; 40 by default)
DRAWS = 12


# ---------------------------------------------------------------- the known mistakes
MISTAKES = {
    # autograd keeps the (B, T, V) log_softmax output for backward
    "log_softmax_then_gather": Mistake(
        "takes log_softmax, then gather: autograd keeps the whole (B, T, V) output for backward",
        """
        import torch
        def log_probs_from_logits(logits, labels):
            lp = torch.log_softmax(logits.to(torch.promote_types(logits.dtype, torch.float32)), dim=-1)
            return lp.gather(-1, labels[..., None]).squeeze(-1)
    """,
        ["large_vocab_B4_T64_V2000"]),
    # the labels are already shifted (notebook 01): shifting again scores the wrong tokens
    "double_shift": Mistake(
        "shifts logits and labels by one again, though the labels are already shifted",
        edited(REFERENCE, (
            "return _SelectedLogProb.apply(logits.reshape(b * t, v), labels.reshape(-1)).view(b, t)",
            "return _SelectedLogProb.apply(logits[:, :-1].reshape(b * (t - 1), v), labels[:, 1:].reshape(-1)).view(b, t - 1)")),
        ["float32_B2_T5_V11"]),
    "no_upcast_of_half_precision": Mistake(
        "computes in bfloat16 or float16 as given instead of upcasting to float32",
        edited(REFERENCE, (
            "return x if x.dtype in (torch.float32, torch.float64) else x.float()", "return x")),
        ["bfloat16_B2_T6_V300"]),
    "float64_cast_down": Mistake(
        "casts float64 logits down to float32: a float64 input must give float64 log-probs",
        edited(REFERENCE, (
            "return x if x.dtype in (torch.float32, torch.float64) else x.float()", "return x.float()")),
        ["float64_B3_T4_V7"]),
    "last_partial_chunk_skipped": Mistake(
        "loops up to the last full chunk of rows, so the last, partial chunk is never computed",
        edited(REFERENCE, (
            "for start in range(0, logits.shape[0], rows):", "for start in range(0, logits.shape[0] - rows + 1, rows):")),
        ["chunks_of_3_rows_B2_T5_V11"],
        # the skipped rows of the gradient are what torch.empty_like left there: no two runs agree
        recognisable=False),
    "backward_ignores_grad_out": Mistake(
        "ignores the incoming gradient in backward (as if it were all ones)",
        edited(REFERENCE, ("g = grad_out[sl]", "g = torch.ones_like(grad_out[sl])")),
        ["float32_B2_T5_V11"]),
    "logsumexp_added": Mistake(
        "adds the logsumexp instead of subtracting it",
        edited(REFERENCE, ("return picked - lse", "return picked + lse")),
        ["float32_B2_T5_V11"]),
    # softmax - onehot: the gradient of -log p, a sign slip
    "backward_sign_flipped": Mistake(
        "returns softmax - onehot in backward, the gradient of -log p instead of log p",
        edited(REFERENCE, (
            "chunk = -g[:, None] * torch.exp(_float(logits[sl]) - lse[sl, None])\n"
            "                chunk.scatter_add_(-1, labels[sl, None], g[:, None].to(chunk.dtype))",
            "chunk = g[:, None] * torch.exp(_float(logits[sl]) - lse[sl, None])\n"
            "                chunk.scatter_add_(-1, labels[sl, None], -g[:, None].to(chunk.dtype))")),
        ["float32_B2_T5_V11"]),
    # log(sum(exp(z))) overflows to inf for logits of magnitude 1e4
    "log_of_sum_of_exp": Mistake(
        "computes log(sum(exp(z))), which overflows to inf for logits of magnitude 1e4",
        edited(REFERENCE, (
            "lse = torch.cat([torch.logsumexp(_float(c), dim=-1) for c in logits.split(rows)])",
            "lse = torch.cat([torch.log(torch.exp(_float(c)).sum(dim=-1)) for c in logits.split(rows)])")),
        ["magnitude_1e4_B2_T4_V17", "shifted_by_1e4_B2_T3_V50"]),
    # a tensor kept as a ctx attribute is kept just the same, only hidden from save_for_backward
    "softmax_kept_as_ctx_attribute": Mistake(
        "keeps the (N, V) softmax as a ctx attribute, which holds it for backward just the same",
        """
        import torch
        class _SelectedLogProb(torch.autograd.Function):
            @staticmethod
            def forward(ctx, logits, labels):
                log_p = torch.log_softmax(logits.to(torch.promote_types(logits.dtype, torch.float32)), dim=-1)
                ctx.probs, ctx.labels, ctx.dtype = log_p.exp(), labels, logits.dtype
                return log_p.gather(-1, labels[:, None]).squeeze(-1)
            @staticmethod
            def backward(ctx, grad_out):
                grad = -grad_out[:, None] * ctx.probs
                grad.scatter_add_(-1, ctx.labels[:, None], grad_out[:, None].to(grad.dtype))
                return grad.to(ctx.dtype), None
        def log_probs_from_logits(logits, labels):
            b, t, v = logits.shape
            return _SelectedLogProb.apply(logits.reshape(b * t, v), labels.reshape(-1)).view(b, t)
    """,
        ["large_vocab_B4_T64_V2000"]),
    # a saved softmax is a (N, V) tensor; and log(softmax) is -inf where it underflows
    "softmax_saved_for_backward": Mistake(
        "saves the (N, V) softmax for backward and takes its log, which is -inf where it underflows",
        """
        import torch
        class _SelectedLogProb(torch.autograd.Function):
            @staticmethod
            def forward(ctx, logits, labels):
                probs = torch.softmax(logits.to(torch.promote_types(logits.dtype, torch.float32)), dim=-1)
                ctx.save_for_backward(probs, labels)
                return torch.log(probs.gather(-1, labels[:, None]).squeeze(-1))
            @staticmethod
            def backward(ctx, grad_out):
                probs, labels = ctx.saved_tensors
                grad = -grad_out[:, None] * probs
                grad.scatter_add_(-1, labels[:, None], grad_out[:, None].to(grad.dtype))
                return grad, None
        def log_probs_from_logits(logits, labels):
            b, t, v = logits.shape
            return _SelectedLogProb.apply(logits.reshape(b * t, v), labels.reshape(-1)).view(b, t)
    """,
        ["large_vocab_B4_T64_V2000", "magnitude_1e4_B2_T4_V17"]),
}
