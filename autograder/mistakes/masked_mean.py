"""The known mistakes of `masked_mean` (notebook 07): the catalogue `autograder.mistakes` describes."""

from __future__ import annotations

from autograder.mistakes import Mistake


MISTAKES = {
    # the count of the whole mask under every row's sum
    "masked_mean_count_over_everything": Mistake(
        "divides each slice's masked sum by the mask count of the whole tensor, not by the count along dim",
        """
        import torch
        def masked_mean(tensor, mask, dim=None):
            kept = torch.where(mask.bool(), tensor, 0.0)
            count = mask.to(kept.dtype)
            if dim is None:
                return kept.sum() / count.sum()
            return kept.sum(dim=dim) / count.sum()
    """,
        ["dim_last_bool_mask_4x7", "3d_dim0"]),
    # tensor[mask] with an int mask indexes rows 0 and 1, it does not select entries
    "masked_mean_indexes_with_the_mask": Mistake(
        "tensor[mask] with an int or float mask indexes rows 0 and 1 instead of selecting the masked entries",
        """
        import torch
        def masked_mean(tensor, mask, dim=None):
            if dim is None:
                return tensor[mask].mean()
            kept = torch.where(mask.bool(), tensor, 0.0)
            return kept.sum(dim=dim) / mask.to(kept.dtype).sum(dim=dim)
    """,
        ["int_mask_dim_none_4x5"]),
    # clamp(min=1) hides an empty response behind a silent 0
    "masked_mean_zero_for_an_empty_row": Mistake(
        "gives 0 for a slice with no masked entry (a clamped count) where the mean of nothing is NaN",
        """
        import torch
        def masked_mean(tensor, mask, dim=None):
            kept = torch.where(mask.bool(), tensor, 0.0)
            count = mask.to(kept.dtype)
            if dim is None:
                return kept.sum() / count.sum().clamp(min=1)
            return kept.sum(dim=dim) / count.sum(dim=dim).clamp(min=1)
    """,
        ["empty_row_gives_nan_dim_last", "all_zero_mask_dim_none"]),
    # -inf * 0 = NaN: a masked-out -inf poisons the row
    "masked_mean_multiplies_by_the_mask": Mistake(
        "multiplies by the mask, so a masked-out inf or NaN becomes NaN (inf * 0) instead of being left out",
        """
        import torch
        def masked_mean(tensor, mask, dim=None):
            kept = tensor * mask
            count = mask.to(kept.dtype)
            if dim is None:
                return kept.sum() / count.sum()
            return kept.sum(dim=dim) / count.sum(dim=dim)
    """,
        ["masked_inf_and_nan"]),
    # zeros in the masked places, then a plain mean: divided by every entry, not by the kept ones
    "mean_including_the_masked_zeros": Mistake(
        "divides by every entry, masked-out ones included, instead of by the number of masked entries",
        """
        import torch
        def masked_mean(tensor, mask, dim=None):
            kept = torch.where(mask.bool(), tensor, 0.0)
            return kept.mean() if dim is None else kept.mean(dim=dim)
    """,
        ["dim_last_bool_mask_4x7", "dim_none_4x7"]),
    # dim never used: a scalar whatever is asked
    "dim_ignored": Mistake(
        "ignores dim and returns one mean over the whole tensor",
        """
        import torch
        def masked_mean(tensor, mask, dim=None):
            kept = torch.where(mask.bool(), tensor, 0.0)
            return kept.sum() / mask.to(kept.dtype).sum()
    """,
        ["dim_last_bool_mask_4x7", "3d_dim1"]),
    # the result in float32 whatever the input: float64 stays float64
    "always_float32": Mistake(
        "computes and returns float32 whatever the input's dtype: a float64 tensor must give a float64 mean",
        """
        import torch
        def masked_mean(tensor, mask, dim=None):
            kept = torch.where(mask.bool(), tensor, 0.0).float()
            count = mask.float()
            if dim is None:
                return kept.sum() / count.sum()
            return kept.sum(dim=dim) / count.sum(dim=dim)
    """,
        ["float64_tensor"]),
}
