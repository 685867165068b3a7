"""The known mistakes of `log_probs_from_logits` (notebook 03): the catalogue `autograder.mistakes` describes."""

from __future__ import annotations

from autograder.mistakes import Mistake, edited


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
