"""Hidden cases of `compute_entropy(logits) -> (...,)`: shapes, dtypes and extreme logits the
visible checks of notebook 02 do not try."""

from __future__ import annotations

import torch

GRADED = "compute_entropy"


def make_inputs(gen: torch.Generator) -> list[tuple[str, dict]]:
    def randn(*shape, scale=1.0, dtype=torch.float32):
        return (torch.randn(*shape, generator=gen, dtype=torch.float64) * scale).to(dtype)

    one_hot = torch.zeros(3, 17)
    one_hot[torch.arange(3), torch.randint(0, 17, (3,), generator=gen)] = 1e4
    two_way = torch.full((2, 9), -1e4)
    two_way[:, 2] = 1e4
    two_way[:, 5] = 1e4  # two tied tokens far above the rest: exactly log 2
    # one token 13 nats above 31999 others (each p = 2e-6): an entropy of many small probabilities, which
    # log(p + eps) biases by about V * eps while the float32 rounding of any order of the sum stays below that
    peaked = torch.full((2, 32000), -13.0)
    peaked[:, 7] = 0.0
    return [
        ("float32_2x3x11", {"logits": randn(2, 3, 11, scale=2.0)}),
        ("float32_leading_dims_2x3x4x6", {"logits": randn(2, 3, 4, 6)}),
        ("float32_vector_V29", {"logits": randn(29, scale=3.0)}),
        ("float64_4x7", {"logits": randn(4, 7, scale=5.0, dtype=torch.float64)}),
        ("bfloat16_3x5x1000", {"logits": randn(3, 5, 1000, scale=4.0, dtype=torch.bfloat16)}),
        ("float16_2x513", {"logits": randn(2, 513, scale=3.0, dtype=torch.float16)}),
        ("V1_5x1", {"logits": randn(5, 1)}),
        ("T1_3x1x50", {"logits": randn(3, 1, 50)}),
        ("magnitude_1e4_4x64", {"logits": randn(4, 64, scale=1e4)}),
        ("one_hot_1e4_3x17", {"logits": one_hot}),
        ("two_tied_1e4_2x9", {"logits": two_way}),
        ("shifted_by_1e4_4x300", {"logits": randn(4, 300, scale=2.0) + 1e4}),
        ("negative_shift_1e4_2x100", {"logits": randn(2, 100, scale=2.0) - 1e4}),
        ("uniform_2x32000", {"logits": torch.zeros(2, 32000)}),
        ("peaked_2x32000", {"logits": peaked}),
        ("float32_2x4x32000", {"logits": randn(2, 4, 32000, scale=3.0)}),
        ("empty_batch_0x10", {"logits": torch.zeros(0, 10)}),
    ]


def call(fn, inputs: dict) -> dict:
    logits = inputs["logits"].clone()
    before = logits.clone()
    entropy = fn(logits)
    return {"entropy": entropy, "input_unchanged": bool(torch.equal(logits, before))}
