"""How the judge calls `compute_per_instance_dpo_loss(lm, lm_ref, tokenizer, beta, prompt,
response_chosen, response_rejected) -> ()` on a hidden case: `call` (fresh copies of the case's
inputs in, named outputs out) and its settings. Public: a student kit and the grading sandbox hold
this file; the cases, the correct versions and the known mistakes are grader.py's.
"""

from __future__ import annotations

import torch
from types import SimpleNamespace

from autograder.suite_api import course_tokenizer

GRADED = "compute_per_instance_dpo_loss"
# the notebook's two functions above this one are part of the exercise: calling the course_lib copies does not count
TRIPWIRE = ["compute_per_instance_dpo_loss", "sequence_log_probs", "dpo_loss"]
WARM = ('transformers', 'tokenizers')  # imported by a judge runner started ahead (autograder.judge)


class TinyCausalLM(torch.nn.Module):
    """logits[b, t] = scale * head(tanh(mean of embeddings of tokens 0..t)): causal, differentiable."""

    def __init__(self, embedding: torch.Tensor, head: torch.Tensor, scale: float = 3.0):
        super().__init__()
        self.embedding = torch.nn.Parameter(embedding.clone())
        self.head = torch.nn.Parameter(head.clone())
        self.scale = scale

    def forward(self, input_ids, **kwargs):
        h = self.embedding[input_ids]  # (B, T, H)
        steps = torch.arange(1, input_ids.shape[1] + 1, dtype=h.dtype).view(1, -1, 1)
        h = torch.tanh(h.cumsum(dim=1) / steps)
        return SimpleNamespace(logits=self.scale * h @ self.head.T)  # (B, T, V)


_NO_EOS: list = []


def _tokenizer(kind: str = "course"):
    """The course tokenizer (shared); "no_eos": a copy of it whose eos_token is None, made once."""
    if kind == "course":
        return course_tokenizer()
    if not _NO_EOS:
        import copy

        _NO_EOS.append(copy.deepcopy(course_tokenizer()))
        _NO_EOS[0].eos_token = None
    return _NO_EOS[0]


def call(fn, inputs: dict) -> dict:
    tokenizer = _tokenizer(inputs["tokenizer"])
    lm = TinyCausalLM(inputs["embedding"], inputs["head"])
    lm_ref = TinyCausalLM(inputs["ref_embedding"], inputs["ref_head"]).requires_grad_(inputs["ref_requires_grad"])
    before = [p.detach().clone() for p in lm_ref.parameters()]
    args = (lm, lm_ref, tokenizer, inputs["beta"], inputs["prompt"], inputs["response_chosen"], inputs["response_rejected"])
    if inputs["expect_error"]:
        try:
            fn(*args)
        except Exception as e:  # noqa: BLE001 - which exception is the output
            return {"raises": "ValueError" if isinstance(e, ValueError) else "other"}
        return {"raises": None}
    loss = fn(*args)
    loss.backward()
    return {
        "loss": loss,
        "grad_embedding": lm.embedding.grad,
        "grad_head": lm.head.grad,
        "ref_got_gradient": any(p.grad is not None for p in lm_ref.parameters()),
        "ref_unchanged": all(torch.equal(p.detach(), q) for p, q in zip(lm_ref.parameters(), before)),
    }
