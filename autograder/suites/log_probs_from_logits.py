"""Hidden cases of `log_probs_from_logits(logits, labels) -> (B, T)` (notebook 03).

Beyond the visible checks: other shapes (T = 1, V = 1, B = 1), labels at both ends of the
vocabulary, float64, bfloat16 and float16 logits (log-probs in float32 at least; float64 stays
float64), logits of magnitude 1e4, enough rows for several chunks of the notebook's
`CHUNK_ELEMENTS` (set small for those cases, 3 or 7 rows per chunk, with a last partial
chunk, wherever the function reads that global), the gradient with respect to the logits
through a weighted sum of the log-probs (float32 and float64), the logits left unchanged, and,
on large logits, what autograd keeps for backward besides the logits: less than an eighth of
their size (a `log_softmax` output or a float32 copy of the logits is a full (B, T, V) tensor),
counting both what `ctx.save_for_backward` saves and any tensor kept as an attribute of `ctx`
(`ctx.probs = ...`), which saved-tensor hooks do not see.
"""

from __future__ import annotations

import torch

GRADED = "log_probs_from_logits"
MEMORY_CHECK_MIN_ELEMENTS = 100_000  # below this, (N,)-sized saved tensors are no small fraction of the logits


def make_inputs(gen: torch.Generator) -> list[tuple[str, dict]]:
    def case(B, T, V, scale=3.0, dtype=torch.float32, labels=None, shift=0.0, rows_per_chunk=None):
        logits = (torch.randn(B, T, V, generator=gen, dtype=torch.float64) * scale + shift).to(dtype)
        lab = torch.randint(0, V, (B, T), generator=gen) if labels is None else labels
        chunk = None if rows_per_chunk is None else rows_per_chunk * V + V // 2
        return {"logits": logits, "labels": lab, "weights": torch.randn(B, T, generator=gen), "chunk_elements": chunk,
                "backward": dtype in (torch.float32, torch.float64)}  # low-precision logits: the forward only

    edge = torch.tensor([[0, 12, 12, 0, 5], [12, 0, 1, 11, 12]])
    return [
        ("float32_B2_T5_V11", case(2, 5, 11)),
        ("float64_B3_T4_V7", case(3, 4, 7, dtype=torch.float64)),
        ("bfloat16_B2_T6_V300", case(2, 6, 300, scale=4.0, dtype=torch.bfloat16)),
        ("float16_B2_T3_V129", case(2, 3, 129, dtype=torch.float16)),
        ("T1_B4_V9", case(4, 1, 9)),
        ("V1_B2_T3", case(2, 3, 1)),
        ("B1_T1_V2", case(1, 1, 2)),
        ("labels_at_vocab_edges_V13", case(2, 5, 13, labels=edge)),
        ("magnitude_1e4_B2_T4_V17", case(2, 4, 17, scale=1e4)),
        ("shifted_by_1e4_B2_T3_V50", case(2, 3, 50, scale=2.0, shift=1e4)),
        ("large_vocab_B4_T64_V2000", case(4, 64, 2000)),
        ("chunks_of_3_rows_B2_T5_V11", case(2, 5, 11, rows_per_chunk=3)),
        ("chunks_of_7_rows_B3_T17_V301", case(3, 17, 301, rows_per_chunk=7)),
        ("chunks_of_3_rows_float64_B2_T4_V6", case(2, 4, 6, dtype=torch.float64, rows_per_chunk=3)),
    ]


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
