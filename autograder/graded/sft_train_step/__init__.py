"""How the judge calls `sft_train_step(model, tokenizer, optimizer, batch_examples,
gradient_accumulation_steps, max_grad_norm=1.0, scheduler=None, tokenize_fn=..., log_probs_fn=...,
train_step_fn=...)` on a hidden case: `call` (fresh copies of the case's inputs in, named outputs
out) and its settings. Public: a student kit and the grading sandbox hold this file; the cases, the
correct versions and the known mistakes are grader.py's.
"""

from __future__ import annotations

import torch
from types import SimpleNamespace

from autograder.suite_api import course_tokenizer

GRADED = "sft_train_step"
WARM = ('transformers', 'tokenizers')  # imported by a judge runner started ahead (autograder.judge)
TIMEOUT = 240


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


def call(fn, inputs: dict) -> dict:
    from course_lib import get_response_log_probs, sft_microbatch_train_step, tokenize_prompt_and_output

    torch.manual_seed(0)
    tokenizer = course_tokenizer()
    model = TinyCausalLM(inputs["embedding"], inputs["head"])
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=inputs["lr"], betas=(0.9, 0.95),
                                  weight_decay=inputs["weight_decay"])
    # a schedule that changes the learning rate at every step: stepping it per micro-batch shows
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 0.5 ** s) if inputs["schedule"] else None
    calls = {"tokenize_fn": 0, "log_probs_fn": 0, "train_step_fn": 0}

    def counting(name, f):
        def wrapped(*args, **kwargs):
            calls[name] += 1
            return f(*args, **kwargs)
        return wrapped

    per_step = []
    batch = inputs["batch"]
    for step in range(inputs["steps"]):
        examples = [dict(e) for e in inputs["examples"][step * batch:(step + 1) * batch]]
        try:
            out = fn(model, tokenizer, optimizer, examples, inputs["k"], inputs["max_grad_norm"], scheduler,
                     tokenize_fn=counting("tokenize_fn", tokenize_prompt_and_output),
                     log_probs_fn=counting("log_probs_fn", get_response_log_probs),
                     train_step_fn=counting("train_step_fn", sft_microbatch_train_step))
        except ValueError:
            return {"raises_value_error": True}
        per_step.append({
            "loss": float(out["loss"]),
            "grad_norm": float(out["grad_norm"]),
            "response_tokens": int(out["response_tokens"]),
            "nll_sum": float(out["nll_sum"]),
            "lr_after": float(optimizer.param_groups[0]["lr"]),
            "no_gradient_left": all(p.grad is None or not bool(p.grad.any()) for p in model.parameters()),
            "embedding": model.embedding.detach().clone(),
            "head": model.head.detach().clone(),
        })
    return {"steps": per_step, "calls": dict(calls), "raises_value_error": False}
