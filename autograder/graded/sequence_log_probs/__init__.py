"""How the judge calls `sequence_log_probs(model, input_ids, labels, response_mask, average=False) ->
(B,)` on a hidden case: `call` (fresh copies of the case's inputs in, named outputs out) and its
settings. Public: a student kit and the grading sandbox hold this file; the cases, the correct
versions and the known mistakes are grader.py's.
"""

from __future__ import annotations

import torch
from types import SimpleNamespace

GRADED = "sequence_log_probs"


class TinyCausalLM(torch.nn.Module):
    """logits[b, t] = scale * head(tanh(mean of embeddings of tokens 0..t)), plus `spike` on the logit
    of token 0 wherever input_ids[b, t] == spike_id: causal, differentiable in embedding and head."""

    def __init__(self, embedding: torch.Tensor, head: torch.Tensor, scale: float, spike_id: int = -1,
                 spike: float = 0.0):
        super().__init__()
        self.embedding = torch.nn.Parameter(embedding.clone())
        self.head = torch.nn.Parameter(head.clone())
        self.scale, self.spike_id, self.spike = scale, spike_id, spike

    def forward(self, input_ids, **kwargs):
        h = self.embedding[input_ids]  # (B, T, H)
        steps = torch.arange(1, input_ids.shape[1] + 1, dtype=h.dtype).view(1, -1, 1)
        h = torch.tanh(h.cumsum(dim=1) / steps)
        logits = self.scale * h @ self.head.T  # (B, T, V)
        if self.spike:
            bump = torch.zeros(logits.shape[-1], dtype=logits.dtype)
            bump[0] = self.spike
            logits = logits + (input_ids == self.spike_id).to(logits.dtype)[..., None] * bump
        return SimpleNamespace(logits=logits)


def call(fn, inputs: dict) -> dict:
    model = TinyCausalLM(inputs["embedding"], inputs["head"], inputs["scale"], inputs["spike_id"], inputs["spike"])
    args = (model, inputs["input_ids"].clone(), inputs["labels"].clone(), inputs["response_mask"].clone())
    kwargs = {} if inputs["average"] is None else {"average": inputs["average"]}
    if inputs["expect_error"]:
        try:
            fn(*args, **kwargs)
        except Exception as e:  # noqa: BLE001 - which exception is the output
            return {"raises": "ValueError" if isinstance(e, ValueError) else "other"}
        return {"raises": None}
    out = fn(*args, **kwargs)
    (out * inputs["weights"].to(out.dtype)).sum().backward()
    return {"sequence_log_probs": out, "grad_embedding": model.embedding.grad, "grad_head": model.head.grad}
