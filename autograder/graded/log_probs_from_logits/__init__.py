"""How the judge calls `log_probs_from_logits(logits, labels) -> (B, T)` on a hidden case: `call`
(fresh copies of the case's inputs in, named outputs out) and its settings. Public: a student kit
and the grading sandbox hold this file; the cases, the correct versions and the known mistakes are
grader.py's.
"""

from __future__ import annotations

import torch

GRADED = "log_probs_from_logits"
MEMORY_CHECK_MIN_ELEMENTS = 100_000  # below this, (N,)-sized saved tensors are no small fraction of the logits


def ctx_attribute_storages(out: torch.Tensor) -> dict[int, int]:
    """{storage pointer: bytes} of the tensors kept as attributes of the nodes of `out`'s graph:
    what a custom autograd.Function stores on `ctx` itself, which saved-tensor hooks never see."""
    found, seen = {}, set()
    stack = [out.grad_fn]
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        for value in getattr(node, "__dict__", {}).values():
            for t in value if isinstance(value, (list, tuple)) else [value]:
                if isinstance(t, torch.Tensor):
                    found[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        stack += [f for f, _ in node.next_functions]
    return found


def call(fn, inputs: dict) -> dict:
    logits = inputs["logits"].clone().requires_grad_()
    before = logits.detach().clone()
    own = logits.untyped_storage().data_ptr()
    kept = {}

    def pack(t):
        if t.untyped_storage().data_ptr() != own:
            kept[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    # the chunk size is a global of the function's module (the notebook's CHUNK_ELEMENTS)
    module_globals = getattr(fn, "__globals__", {})
    saved_chunk = module_globals.get("CHUNK_ELEMENTS")
    if inputs.get("chunk_elements") and saved_chunk is not None:
        module_globals["CHUNK_ELEMENTS"] = inputs["chunk_elements"]
    try:
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            out = fn(logits, inputs["labels"].clone())
        result = {"log_probs": out, "input_unchanged": bool(torch.equal(logits.detach(), before))}
        if logits.numel() >= MEMORY_CHECK_MIN_ELEMENTS:
            if isinstance(out, torch.Tensor) and out.grad_fn is not None:
                kept.update({ptr: n for ptr, n in ctx_attribute_storages(out).items() if ptr != own})
            result["keeps_less_than_an_eighth_of_the_logits"] = sum(kept.values()) < logits.numel() * logits.element_size() / 8
        if inputs["backward"]:
            (out * inputs["weights"].to(out.dtype)).sum().backward()
            result["grad_logits"] = logits.grad
    finally:
        if saved_chunk is not None:
            module_globals["CHUNK_ELEMENTS"] = saved_chunk
    return result
