"""Hidden cases of `get_response_log_probs(model, input_ids, labels, return_token_entropy=False)`.

The model is a small causal LM built here from the case's weights (embedding -> causal running
mean -> tanh -> output head), so the inputs are plain tensors. Outputs: the log-probs, the
entropies (or None), whether the entropy carries a graph, and, for float32/float64 models, the
gradients of the parameters through a weighted sum of the log-probs.

The truth (`truth`) is the exact log-softmax, in float64, of *the model's own logits*: the model
runs in its own precision, as it does for any student (a bfloat16 model's forward rounds its
logits before any graded code sees them), and the graded part, everything after the logits, is
exact; its gradient flows back through the model in the model's precision.
"""

from __future__ import annotations

from types import SimpleNamespace

import torch

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


def make_inputs(gen: torch.Generator) -> list[tuple[str, dict]]:
    def case(B, T, V, H=8, scale=3.0, dtype=torch.float32, entropy=True, labels=None):
        emb = torch.randn(V, H, generator=gen, dtype=torch.float64).to(dtype)
        head = torch.randn(V, H, generator=gen, dtype=torch.float64).to(dtype)
        ids = torch.randint(0, V, (B, T), generator=gen)
        lab = torch.randint(0, V, (B, T), generator=gen) if labels is None else labels
        weights = torch.randn(B, T, generator=gen)
        return {"embedding": emb, "head": head, "scale": scale, "input_ids": ids, "labels": lab,
                "weights": weights, "return_token_entropy": entropy,
                "backward": dtype in (torch.float32, torch.float64)}  # low-precision weights: the forward only

    edge = torch.tensor([[0, 12, 12, 0, 5], [12, 0, 1, 11, 12]])
    return [
        ("float32_B2_T5_V11_entropy", case(2, 5, 11)),
        ("float32_B3_T4_V7_no_entropy", case(3, 4, 7, entropy=False)),
        ("float64_B2_T6_V13", case(2, 6, 13, dtype=torch.float64)),
        ("bfloat16_B2_T6_V300", case(2, 6, 300, dtype=torch.bfloat16)),
        ("T1_B4_V9", case(4, 1, 9)),
        ("V1_B2_T3", case(2, 3, 1)),
        ("B1_T1_V1_no_entropy", case(1, 1, 1, entropy=False)),
        ("labels_at_vocab_edges_V13", case(2, 5, 13, labels=edge)),
        ("logits_magnitude_1e4", case(2, 4, 17, scale=3e3)),
        ("large_vocab_B2_T8_V5000", case(2, 8, 5000, H=4)),
        ("many_chunks_B2_T300_V8000", case(2, 300, 8000, H=4, scale=2.0)),
    ]


def truth(inputs: dict) -> dict:
    model = TinyCausalLM(inputs["embedding"], inputs["head"], inputs["scale"])
    logits = model(inputs["input_ids"]).logits  # (B, T, V) in the model's own precision
    log_p = torch.log_softmax(logits.double(), dim=-1)
    log_probs = log_p.gather(-1, inputs["labels"][..., None])[..., 0]
    entropy = -(log_p.exp() * log_p).sum(-1).detach() if inputs["return_token_entropy"] else None
    result = {"log_probs": log_probs, "token_entropy": entropy, "token_entropy_requires_grad": False}
    if inputs["backward"]:
        (log_probs * inputs["weights"].double()).sum().backward()
        result["grad_embedding"] = model.embedding.grad.double()
        result["grad_head"] = model.head.grad.double()
    return result


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
