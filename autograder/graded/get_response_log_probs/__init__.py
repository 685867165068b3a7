"""How the judge calls `get_response_log_probs(model, input_ids, labels, return_token_entropy=False)`
on a hidden case: `call` (fresh copies of the case's inputs in, named outputs out) and its settings.
Public: a student kit and the grading sandbox hold this file; the cases, the correct versions and
the known mistakes are grader.py's.
"""

from __future__ import annotations

import torch
from types import SimpleNamespace

GRADED = "get_response_log_probs"
# the chunked helper is part of the exercise: calling the course_lib copy does not count
TRIPWIRE = ["get_response_log_probs", "log_probs_from_logits"]


class TinyCausalLM(torch.nn.Module):
    """logits[b, t] = scale * head(tanh(mean of embeddings of tokens 0..t)): causal, differentiable."""

    def __init__(self, embedding: torch.Tensor, head: torch.Tensor, scale: float):
        super().__init__()
        self.embedding = torch.nn.Parameter(embedding.clone())
        self.head = torch.nn.Parameter(head.clone())
        self.scale = scale

    def forward(self, input_ids, **kwargs):
        h = self.embedding[input_ids]  # (B, T, H)
        steps = torch.arange(1, input_ids.shape[1] + 1, dtype=h.dtype).view(1, -1, 1)
        h = torch.tanh(h.cumsum(dim=1) / steps)
        return SimpleNamespace(logits=self.scale * h @ self.head.T)  # (B, T, V)


def call(fn, inputs: dict) -> dict:
    model = TinyCausalLM(inputs["embedding"], inputs["head"], inputs["scale"])
    out = fn(model, inputs["input_ids"].clone(), inputs["labels"].clone(), return_token_entropy=inputs["return_token_entropy"])
    entropy = out["token_entropy"]
    result = {
        "log_probs": out["log_probs"],
        "token_entropy": entropy,
        "token_entropy_requires_grad": bool(entropy is not None and entropy.requires_grad),
    }
    if inputs["backward"]:
        (out["log_probs"] * inputs["weights"].to(out["log_probs"].dtype)).sum().backward()
        result["grad_embedding"] = model.embedding.grad
        result["grad_head"] = model.head.grad
    return result
