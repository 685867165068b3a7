"""Per-token log-probabilities and entropies from a causal LM, without extra (B, T, V) copies.

The logits of a batch are the largest tensor in post-training: (B, T, V) floats, 131 MB for
(4, 256, 32000) in float32, 2.5 GB for (8, 1024, 151936) in bf16 (5.0 GB in float32). The naive
`log_softmax(logits).gather(labels)` makes a second tensor of that size (and keeps it for
backward). Here the log-normaliser is computed a few rows at a time, so the only (B, T, V)
tensors are the logits themselves and, in backward, their gradient.
"""

from __future__ import annotations

import torch

# rows of the flattened (B*T, V) logits handled at once: bounds temporaries to ~CHUNK * V floats
CHUNK_ELEMENTS = 1 << 22


def _row_chunks(n_rows: int, vocab: int) -> int:
    return max(1, CHUNK_ELEMENTS // max(vocab, 1))


def _float(x: torch.Tensor) -> torch.Tensor:
    """float32 at least (bf16/fp16 log-normalisers lose ~2 digits); float64 stays float64."""
    return x if x.dtype in (torch.float32, torch.float64) else x.float()


def compute_entropy(logits: torch.Tensor) -> torch.Tensor:
    """Entropy of the softmax distribution over the last dimension.

        H = -sum_v p_v log p_v,   log p = log_softmax(logits)

    Computed from log_softmax, never from softmax followed by log: for logits of magnitude 1e4
    the small probabilities underflow to 0 and log(0) = -inf would give 0 * -inf = NaN, while
    log_softmax stays finite and exp(log p) * log p is exactly 0 there.

    Args:
        logits: (..., V), any leading shape (none: a (V,) vector gives a 0-dim entropy; an empty
            batch gives an empty result), any float dtype; left unchanged (no in-place op).
    Returns:
        (...,) entropies in nats, computed and returned in float32 for bfloat16, float16 and
        float32 logits, in float64 for float64 ones.
    """
    log_p = torch.log_softmax(logits.to(torch.promote_types(logits.dtype, torch.float32)), dim=-1)
    return -(log_p.exp() * log_p).sum(dim=-1)


class _SelectedLogProb(torch.autograd.Function):
    """log p(label) = logit[label] - logsumexp(logits), chunked over rows in forward and backward.

    Saves only the logits (which exist anyway), the labels and the (N,) log-normalisers; the
    backward writes d logits = g * (onehot - softmax) chunk by chunk into one gradient tensor.
    """

    @staticmethod
    def forward(ctx, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:  # (N, V), (N,) -> (N,)
        """(N,) log-probs (float32 at least); saves (logits, labels, lse) with ctx.save_for_backward."""
        rows = _row_chunks(*logits.shape)
        lse = torch.cat([torch.logsumexp(_float(c), dim=-1) for c in logits.split(rows)])
        picked = _float(logits.gather(-1, labels[:, None]).squeeze(-1))
        ctx.save_for_backward(logits, labels, lse)
        return picked - lse

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor):
        """(d logits, None): d logits has the logits' shape and dtype; None for the integer labels."""
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


def log_probs_from_logits(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """log softmax(logits)[label] for every position, with no extra (B, T, V) tensor.

    Through `_SelectedLogProb`, `_row_chunks(N, V)` rows at a time (the chunk size read from the
    module's `CHUNK_ELEMENTS` at each call): what autograd keeps for backward besides the logits
    is the labels and (B*T,) log-normalisers, no softmax and no float32 copy of the logits.

    Args:
        logits: (B, T, V), any float dtype (B, T or V may be 1); left unchanged.
        labels: (B, T) token ids in [0, V).
    Returns:
        (B, T) log-probabilities, float32 for bfloat16, float16 and float32 logits, float64 for
        float64 ones; differentiable w.r.t. the logits (their gradient in the logits' dtype).
    """
    batch, seq, vocab = logits.shape
    flat = _SelectedLogProb.apply(logits.reshape(batch * seq, vocab), labels.reshape(-1))
    return flat.view(batch, seq)


def entropy_from_logits(logits: torch.Tensor) -> torch.Tensor:
    """`compute_entropy` over (B, T, V) logits a few rows at a time, without gradient: (B, T)."""
    batch, seq, vocab = logits.shape
    flat = logits.reshape(batch * seq, vocab)
    with torch.no_grad():
        ent = torch.cat([compute_entropy(c) for c in flat.split(_row_chunks(*flat.shape))])
    return ent.view(batch, seq)


def get_response_log_probs(
    model: torch.nn.Module,
    input_ids: torch.Tensor,
    labels: torch.Tensor,
    return_token_entropy: bool = False,
) -> dict[str, torch.Tensor | None]:
    """Per-token conditional log-probabilities log p(labels[t] | input_ids[:t+1]) under `model`.

    Args:
        model: a causal LM whose forward returns `.logits` of shape (B, T, V). Any final-logit
            soft cap is the model's business: Gemma 2's forward applies it already.
        input_ids: (B, T) token ids; labels: (B, T), the inputs shifted by one
            (see `tokenize_prompt_and_output`).
        return_token_entropy: also return the entropy of each next-token distribution
            (a diagnostic: computed without gradient).

    Returns:
        {"log_probs": (B, T), "token_entropy": (B, T) or None}, unmasked: prompt and padding
        positions are included; mask them with `response_mask`. Both in the model's dtype,
        float32 at least (float32 for a bfloat16, float16 or float32 model, float64 for a float64
        one), computed by `log_probs_from_logits` and `entropy_from_logits`; the log-probs carry
        the gradient to the model's parameters, the entropy none (None when return_token_entropy
        is False).
    """
    logits = model(input_ids).logits
    return {
        "log_probs": log_probs_from_logits(logits, labels),
        "token_entropy": entropy_from_logits(logits) if return_token_entropy else None,
    }
