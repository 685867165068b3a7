"""The grader's side of `masked_normalize` (notebook 03): how its hidden cases are drawn, the correct
versions that must earn full marks and the known mistakes that must lose them, each with the
sentence a student reads (`autograder.mistakes`). Never in a student kit or the grading sandbox,
which hold the folder's __init__.py only.

Hidden cases of `masked_normalize(tensor, mask, dim=None, normalize_constant=1.0)`: every dim
of 3-d tensors, mask dtypes, odd constants, empty masks, masked infinities, and the gradient.

The contract says masked-out entries may hold -inf or NaN (a padding log-prob), so multiplying by
the mask (0 * inf = NaN) is a mistake; selecting (where, masked_fill, boolean indexing) is right.
"""

from __future__ import annotations

import torch

from autograder.mistakes import Mistake


# ---------------------------------------------------------------- the hidden cases
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


# ---------------------------------------------------------------- the correct versions
CORRECT = {
    "torch_where": """
        import torch
        def masked_normalize(tensor, mask, dim=None, normalize_constant=1.0):
            kept = torch.where(mask.bool(), tensor, 0.0)
            total = kept.sum() if dim is None else kept.sum(dim=dim)
            return total / normalize_constant
    """,
    "masked_fill": """
        def masked_normalize(tensor, mask, dim=None, normalize_constant=1.0):
            kept = tensor.masked_fill(~mask.bool().expand_as(tensor), 0)
            total = kept.sum() if dim is None else kept.sum(dim)
            return total / normalize_constant
    """,
    # boolean indexing picks the kept entries for dim=None (a broadcast mask expanded first)
    "boolean_indexing": """
        import torch
        def masked_normalize(tensor, mask, dim=None, normalize_constant=1.0):
            keep = mask.bool().expand(tensor.shape)
            if dim is None:
                return tensor[keep].sum() / normalize_constant
            zeros = torch.zeros_like(tensor)
            return torch.where(keep, tensor, zeros).sum(dim=dim) / normalize_constant
    """,
    # each entry divided first, then summed: the same number, another rounding
    "divide_then_sum": """
        import torch
        def masked_normalize(tensor, mask, dim=None, normalize_constant=1.0):
            scaled = torch.where(mask != 0, tensor / normalize_constant, torch.zeros_like(tensor))
            return scaled.sum() if dim is None else scaled.sum(dim)
    """,
    # accumulated in float64, cast back to the tensor's dtype
    "float64_accumulation": """
        import torch
        def masked_normalize(tensor, mask, dim=None, normalize_constant=1.0):
            kept = torch.where(mask.bool(), tensor.double(), 0.0)
            total = kept.sum() if dim is None else kept.sum(dim=dim)
            return (total / normalize_constant).to(tensor.dtype)
    """,
}


# ---------------------------------------------------------------- the known mistakes
MISTAKES = {
    # 0 * (-inf) = NaN: a masked padding log-prob leaks into the sum
    "tensor_times_mask": Mistake(
        "multiplies by the mask, so a masked-out inf or NaN becomes NaN (inf * 0) instead of being left out",
        """
        def masked_normalize(tensor, mask, dim=None, normalize_constant=1.0):
            kept = tensor * mask
            return (kept.sum() if dim is None else kept.sum(dim=dim)) / normalize_constant
    """,
        ["masked_inf_and_nan"]),
    "divides_by_the_token_count": Mistake(
        "divides by the number of masked entries instead of by normalize_constant",
        """
        import torch
        def masked_normalize(tensor, mask, dim=None, normalize_constant=1.0):
            kept = torch.where(mask.bool(), tensor, 0.0)
            if dim is None:
                return kept.sum() / mask.sum()
            return kept.sum(dim=dim) / mask.sum(dim=dim)
    """,
        ["dim_last_c42_bool_mask", "all_zero_mask_dim_none"]),
    "dim_none_sums_the_last_dim": Mistake(
        "sums the last dimension for dim=None instead of every entry",
        """
        import torch
        def masked_normalize(tensor, mask, dim=None, normalize_constant=1.0):
            kept = torch.where(mask.bool(), tensor, 0.0)
            return kept.sum(dim=-1 if dim is None else dim) / normalize_constant
    """,
        ["dim_none_c42", "3d_dim_none"]),
    "cast_to_float32": Mistake(
        "casts to float32: a float64 tensor must give a float64 sum",
        """
        import torch
        def masked_normalize(tensor, mask, dim=None, normalize_constant=1.0):
            kept = torch.where(mask.bool(), tensor.float(), 0.0)
            return (kept.sum() if dim is None else kept.sum(dim=dim)) / normalize_constant
    """,
        ["float64_tensor"]),
    # torch.where needs a bool condition: an int or float mask raises
    "bool_mask_assumed": Mistake(
        "uses the mask as a boolean condition as it is, so an int or float mask raises",
        """
        import torch
        def masked_normalize(tensor, mask, dim=None, normalize_constant=1.0):
            kept = torch.where(mask, tensor, 0.0)
            return (kept.sum() if dim is None else kept.sum(dim=dim)) / normalize_constant
    """,
        ["float_mask_0_1", "long_mask_0_1"]),
    "mean_instead_of_sum": Mistake(
        "takes the mean of the masked entries instead of their sum",
        """
        import torch
        def masked_normalize(tensor, mask, dim=None, normalize_constant=1.0):
            kept = torch.where(mask.bool(), tensor, 0.0)
            return (kept.mean() if dim is None else kept.mean(dim=dim)) / normalize_constant
    """,
        ["dim_last_c42_bool_mask", "dim_none_c42"]),
    "multiplies_by_the_constant": Mistake(
        "multiplies by normalize_constant instead of dividing by it",
        """
        import torch
        def masked_normalize(tensor, mask, dim=None, normalize_constant=1.0):
            kept = torch.where(mask.bool(), tensor, 0.0)
            return (kept.sum() if dim is None else kept.sum(dim=dim)) * normalize_constant
    """,
        ["dim_last_c42_bool_mask", "dim0_c_half"]),
    # keepdim=True: a (B, 1) result where the contract says (B,)
    "keepdim": Mistake(
        "keeps the reduced dimension: a (B, 1) result where the contract says (B,)",
        """
        import torch
        def masked_normalize(tensor, mask, dim=None, normalize_constant=1.0):
            kept = torch.where(mask.bool(), tensor, 0.0)
            return (kept.sum() if dim is None else kept.sum(dim=dim, keepdim=True)) / normalize_constant
    """,
        ["dim_last_c42_bool_mask", "3d_dim1"]),
    # `//` (a habit from integer code) floors the quotient
    "floor_division": Mistake(
        "floor-divides (//) by the constant instead of dividing",
        """
        import torch
        def masked_normalize(tensor, mask, dim=None, normalize_constant=1.0):
            kept = torch.where(mask.bool(), tensor, 0.0)
            return (kept.sum() if dim is None else kept.sum(dim=dim)) // normalize_constant
    """,
        ["int_constant_3", "dim_last_c42_bool_mask"],
        # it raises on every case that asks for no error (RuntimeError: floor division has no derivative):
        # an exception's class alone is no evidence of this mistake, so recognition cannot name it
        recognisable=False),
}
