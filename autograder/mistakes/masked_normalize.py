"""The known mistakes of `masked_normalize` (notebook 03): the catalogue `autograder.mistakes` describes."""

from __future__ import annotations

from autograder.mistakes import Mistake


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
