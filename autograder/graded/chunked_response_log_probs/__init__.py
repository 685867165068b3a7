"""How the judge calls `chunked_response_log_probs(model, input_ids, labels, chunk_size) -> (B, T)` on
a hidden case: `call` (fresh copies of the case's inputs in, named outputs out) and its settings.
Public: a student kit and the grading sandbox hold this file; the cases, the correct versions and
the known mistakes are grader.py's.
"""

from __future__ import annotations

import torch

GRADED = "chunked_response_log_probs"
WARM = ('transformers',)  # imported by a judge runner started ahead (autograder.judge)
TRIPWIRE = ["chunked_response_log_probs", "final_logits_softcap"]

ARCHITECTURES = {"gemma2": ("Gemma2Config", "Gemma2ForCausalLM"), "qwen2": ("Qwen2Config", "Qwen2ForCausalLM")}


def build_model(arch: str, config: dict, state: dict | None = None, dtype=torch.float32):
    """The case's model in eval mode; `state` (a state dict) sets every weight."""
    import transformers

    config_cls, model_cls = (getattr(transformers, n) for n in ARCHITECTURES[arch])
    with torch.random.fork_rng():
        torch.manual_seed(0)  # the random init is overwritten by `state`; fixed so it is harmless
        model = model_cls(config_cls(**config))
    model.to(dtype)
    if state is not None:
        model.load_state_dict(state)
    return model.eval()


def call(fn, inputs: dict) -> dict:
    model = build_model(inputs["arch"], inputs["config"], inputs["state"], inputs["dtype"])
    log_probs = fn(model, inputs["input_ids"].clone(), inputs["labels"].clone(), chunk_size=inputs["chunk_size"])
    (log_probs * inputs["weights"].to(log_probs.dtype)).sum().backward()
    head = model.get_output_embeddings().weight
    return {"log_probs": log_probs, "grad_output_layer": head.grad, "grad_final_norm": model.model.norm.weight.grad}
