"""Hidden cases of `masked_mean(tensor, mask, dim=None)`: every dim of 3-d tensors, bool / float /
long masks, rows with no unmasked entry (NaN there, and only there), masked infinities, and
the gradient.

Outputs: the mean and, where no row is empty, the gradient of a weighted sum of it with respect
to `tensor` (an empty row's gradient is 0 * inf either way, so it is not compared).

What the cases are built to catch: a count taken over the whole tensor instead of along `dim`
(the per-row counts differ in every case), `tensor[mask]` (with a float or long mask this
indexes rows instead of selecting entries), 0 instead of NaN for an empty row, `tensor * mask`
with a masked -inf or NaN (inf * 0 = NaN leaks into the mean), a mask of another shape
broadcast against the tensor, float64 kept as float64.
"""

from __future__ import annotations

import torch

GRADED = "masked_mean"


def make_inputs(gen: torch.Generator) -> list[tuple[str, dict]]:
    def randn(*shape, dtype=torch.float32):
        return torch.randn(*shape, generator=gen, dtype=torch.float64).to(dtype)

    def mask(*shape, p=0.6):
        """A random mask with at least one kept entry in every row and different counts per row."""
        m = torch.rand(*shape, generator=gen) < p
        m[..., 0] = True
        if m.dim() >= 2 and m.shape[-1] > 2:
            m[..., 0, -1] = False  # the first row loses its last entry: counts differ between rows
            m[..., -1, -1] = True
        return m

    x3 = randn(2, 3, 5)
    m3 = mask(2, 3, 5)
    m3[:, :, 1] = torch.rand(2, 3, generator=gen) < 0.5  # counts along dims 0 and 1 differ too
    m3[1] |= ~m3[0]  # but no slice is empty (the empty ones have cases of their own)
    m3[:, 2] |= ~(m3[:, 0] | m3[:, 1])
    inf_x = randn(3, 6)
    inf_m = mask(3, 6)
    inf_m[:, 1] = False
    inf_x[:, 1] = -float("inf")
    inf_x[2, 3] = float("nan")
    inf_m[2, 3] = False
    empty_row = mask(4, 6)
    empty_row[2] = False
    cases = [
        ("dim_last_bool_mask_4x7", {"tensor": randn(4, 7), "mask": mask(4, 7), "dim": -1}),
        ("dim_1_bool_mask_3x9", {"tensor": randn(3, 9), "mask": mask(3, 9), "dim": 1}),
        ("dim_none_4x7", {"tensor": randn(4, 7), "mask": mask(4, 7), "dim": None}),
        ("dim_default_3x5", {"tensor": randn(3, 5), "mask": mask(3, 5), "dim": "default"}),
        ("dim0_5x3", {"tensor": randn(5, 3), "mask": mask(5, 3, p=0.9), "dim": 0}),
        ("float_mask_3x6", {"tensor": randn(3, 6), "mask": mask(3, 6).float(), "dim": -1}),
        ("long_mask_3x6", {"tensor": randn(3, 6), "mask": mask(3, 6).long(), "dim": -1}),
        ("int_mask_dim_none_4x5", {"tensor": randn(4, 5), "mask": mask(4, 5).int(), "dim": None}),
        ("3d_dim0", {"tensor": x3, "mask": m3, "dim": 0}),
        ("3d_dim1", {"tensor": x3, "mask": m3, "dim": 1}),
        ("3d_dim2", {"tensor": x3, "mask": m3, "dim": 2}),
        ("3d_dim_none", {"tensor": x3, "mask": m3, "dim": None}),
        ("empty_row_gives_nan_dim_last", {"tensor": randn(4, 6), "mask": empty_row, "dim": -1}),
        ("all_zero_mask_dim_none", {"tensor": randn(3, 5), "mask": torch.zeros(3, 5, dtype=torch.bool), "dim": None}),
        ("all_one_mask", {"tensor": randn(3, 5), "mask": torch.ones(3, 5, dtype=torch.bool), "dim": -1}),
        ("masked_inf_and_nan", {"tensor": inf_x, "mask": inf_m, "dim": -1}),
        ("float64_tensor", {"tensor": randn(4, 6, dtype=torch.float64), "mask": mask(4, 6), "dim": -1}),
        ("T1_column", {"tensor": randn(6, 1), "mask": torch.ones(6, 1, dtype=torch.bool), "dim": -1}),
        ("vector_1d", {"tensor": randn(11), "mask": mask(11), "dim": 0}),
        ("B8_T128_dim_last", {"tensor": randn(8, 128), "mask": mask(8, 128, p=0.3), "dim": -1}),
    ]
    return cases


def call(fn, inputs: dict) -> dict:
    tensor = inputs["tensor"].clone().requires_grad_()
    mask = inputs["mask"].clone()
    out = fn(tensor, mask) if inputs["dim"] == "default" else fn(tensor, mask, dim=inputs["dim"])
    result = {"mean": out}
    if not bool(torch.isnan(out.detach()).any()):
        weights = torch.linspace(-1.0, 2.0, out.numel(), dtype=out.dtype).view(out.shape)
        (out * weights).sum().backward()
        result["grad"] = tensor.grad
    return result
