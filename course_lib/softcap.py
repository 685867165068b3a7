"""Gemma 2's final-logit soft cap, and a memory-saving log-prob path that keeps it.

Gemma 2 squashes its output logits into (-cap, cap) with `cap * tanh(logits / cap)` (config field
`final_logit_softcapping`, 30.0 in the released models). Its forward applies the cap to `.logits`,
and generation samples from those capped logits. A trainer that saves memory by applying the
output layer to the final hidden states a few rows at a time (as asynchronous GRPO trainers do
to score old and reference log-probs) starts *after* the model's forward has finished, so the cap
is its job: forget it, or read it under a misspelt key, and every training log-prob silently
disagrees with the distribution the rollouts were sampled from. Notebook 08 measures that gap.
"""

from __future__ import annotations

import torch


def final_logits_softcap(logits: torch.Tensor, cap: float | None) -> torch.Tensor:
    """Gemma 2's final-logit soft cap: cap * tanh(logits / cap); unchanged when cap is None or 0.

    Shape-preserving, (..., V) -> (..., V) for any leading shape, in the logits' dtype (float32
    stays float32, float64 stays float64); the input is not modified; differentiable (the
    gradient is 1 - tanh^2(logits / cap), 1 without a cap). The cap is a float or an int; None,
    0 and 0.0 mean no cap (never a division by zero). The Hugging Face config field that turns
    it on is `final_logit_softcapping` (singular "logit"); Gemma 2's forward already applies it
    to `.logits`, so apply it yourself only on a path that starts from hidden states.
    """
    if not cap:  # None (no such field) or 0 (switched off): no cap, and no division by zero
        return logits
    return cap * torch.tanh(logits / cap)


def chunked_response_log_probs(
    model: torch.nn.Module,
    input_ids: torch.Tensor,
    labels: torch.Tensor,
    chunk_size: int = 1024,
) -> torch.Tensor:
    """Per-token log p(labels[t] | input_ids[:t+1]) from the final hidden states, a block of rows at a time.

    The model's body (`model.get_decoder()`) runs once and gives the (B, T, H) hidden states
    after the final norm; the output layer (`model.get_output_embeddings()`, the `lm_head`) is then
    applied to `chunk_size` rows of the flattened (B*T, H) states at a time (the last block may be
    partial), so at most a (chunk_size, V) block of logits exists at once, never the (B, T, V)
    logits. Because the path starts from hidden states, the model's final-logit soft cap is
    applied here, read from `model.config.final_logit_softcapping` (absent, as on Qwen2, or None
    or 0: no cap; the misspelt `final_logits_softcapping` is not it) through
    `final_logits_softcap`, so the log-probs equal those of the model's own forward.

    With gradients on, autograd keeps each block's log-softmax for backward; the memory saved is
    that of the forward peak and of no-gradient scoring (old-policy and reference log-probs).

    Args:
        model: a Hugging Face causal LM (`get_decoder()`, `get_output_embeddings()`, `config`).
        input_ids: (B, T) token ids; labels: (B, T), the inputs shifted by one (see
            `tokenize_prompt_and_output`: no second shift here).
        chunk_size: rows (token positions) of the flattened batch per block, at least 1.

    Returns:
        (B, T) log-probabilities in the model's dtype, float32 at least (a bfloat16 model's are
        float32, float64 stays float64), differentiable with respect to the model's parameters;
        unmasked (prompt and padding positions included).
    """
    hidden = model.get_decoder()(input_ids=input_ids).last_hidden_state  # (B, T, H), after the final norm
    head = model.get_output_embeddings()
    cap = getattr(model.config, "final_logit_softcapping", None)  # the real field; Qwen2 has none
    flat_hidden = hidden.reshape(-1, hidden.shape[-1])  # (N, H), N = B*T
    flat_labels = labels.reshape(-1)  # (N,)
    pieces = []
    for start in range(0, flat_hidden.shape[0], chunk_size):
        rows = slice(start, start + chunk_size)
        logits = final_logits_softcap(head(flat_hidden[rows]), cap)  # (n, V): the only logits alive
        logits = logits.to(torch.promote_types(logits.dtype, torch.float32))  # bf16 log-normalisers lose digits
        log_p = torch.log_softmax(logits, dim=-1)
        pieces.append(log_p.gather(-1, flat_labels[rows, None]).squeeze(-1))
    return torch.cat(pieces).view(labels.shape)
