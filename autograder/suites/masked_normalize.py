"""Hidden cases of `masked_normalize(tensor, mask, dim=None, normalize_constant=1.0)`: every dim
of 3-d tensors, mask dtypes, odd constants, empty masks, masked infinities, and the gradient."""

from __future__ import annotations

import torch

GRADED = "masked_normalize"


def make_inputs(gen: torch.Generator) -> list[tuple[str, dict]]:
    def randn(*shape, dtype=torch.float32):
        return torch.randn(*shape, generator=gen, dtype=torch.float64).to(dtype)

    def mask(*shape, p=0.6):
        return torch.rand(*shape, generator=gen) < p

    x3 = randn(2, 3, 5)
    m3 = mask(2, 3, 5)
    inf_x = randn(3, 6)
    inf_m = mask(3, 6)
    inf_m[:, 0] = False
    inf_x[:, 0] = -float("inf")
    inf_x[1, 1] = float("nan")
    inf_m[1, 1] = False
    cases = [
        ("dim_last_c42_bool_mask", {"tensor": randn(4, 7), "mask": mask(4, 7), "dim": -1, "normalize_constant": 42.0}),
        ("dim_none_c42", {"tensor": randn(4, 7), "mask": mask(4, 7), "dim": None, "normalize_constant": 42.0}),
        ("dim_none_default_constant", {"tensor": randn(3, 5), "mask": mask(3, 5), "dim": None, "normalize_constant": None}),
        ("dim0_c_half", {"tensor": randn(5, 3), "mask": mask(5, 3), "dim": 0, "normalize_constant": 0.5}),
        ("int_constant_3", {"tensor": randn(2, 9), "mask": mask(2, 9), "dim": 1, "normalize_constant": 3}),
        ("float_mask_0_1", {"tensor": randn(3, 4), "mask": mask(3, 4).float(), "dim": -1, "normalize_constant": 42.0}),
        ("long_mask_0_1", {"tensor": randn(3, 4), "mask": mask(3, 4).long(), "dim": -1, "normalize_constant": 7.0}),
        ("3d_dim0", {"tensor": x3, "mask": m3, "dim": 0, "normalize_constant": 42.0}),
        ("3d_dim1", {"tensor": x3, "mask": m3, "dim": 1, "normalize_constant": 42.0}),
        ("3d_dim2", {"tensor": x3, "mask": m3, "dim": 2, "normalize_constant": 42.0}),
        ("3d_dim_minus2", {"tensor": x3, "mask": m3, "dim": -2, "normalize_constant": 42.0}),
        ("3d_dim_none", {"tensor": x3, "mask": m3, "dim": None, "normalize_constant": 42.0}),
        ("broadcast_mask_2x3x1", {"tensor": x3[:, :, :4], "mask": mask(2, 3, 1), "dim": -1, "normalize_constant": 42.0}),
        ("all_zero_mask_dim_last", {"tensor": randn(3, 5), "mask": torch.zeros(3, 5, dtype=torch.bool), "dim": -1, "normalize_constant": 42.0}),
        ("all_zero_mask_dim_none", {"tensor": randn(3, 5), "mask": torch.zeros(3, 5, dtype=torch.bool), "dim": None, "normalize_constant": 42.0}),
        ("all_one_mask", {"tensor": randn(3, 5), "mask": torch.ones(3, 5, dtype=torch.bool), "dim": -1, "normalize_constant": 42.0}),
        ("masked_inf_and_nan", {"tensor": inf_x, "mask": inf_m, "dim": -1, "normalize_constant": 42.0}),
        ("float64_tensor", {"tensor": randn(4, 6, dtype=torch.float64), "mask": mask(4, 6), "dim": -1, "normalize_constant": 42.0}),
        ("T1_column", {"tensor": randn(6, 1), "mask": mask(6, 1), "dim": -1, "normalize_constant": 42.0}),
        ("vector_1d", {"tensor": randn(11), "mask": mask(11), "dim": 0, "normalize_constant": 42.0}),
    ]
    return cases


def call(fn, inputs: dict) -> dict:
    tensor = inputs["tensor"].clone().requires_grad_()
    kwargs = {"dim": inputs["dim"]}
    if inputs["normalize_constant"] is not None:
        kwargs["normalize_constant"] = inputs["normalize_constant"]
    out = fn(tensor, inputs["mask"].clone(), **kwargs)
    weights = torch.linspace(-1.0, 2.0, out.numel(), dtype=out.dtype).view(out.shape)
    (out * weights).sum().backward()
    return {"out": out, "grad": tensor.grad}
