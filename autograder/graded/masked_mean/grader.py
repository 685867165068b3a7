"""The grader's side of `masked_mean` (notebook 07): how its hidden cases are drawn, the correct
versions that must earn full marks and the known mistakes that must lose them, each with the
sentence a student reads (`autograder.mistakes`). Never in a student kit or the grading sandbox,
which hold the folder's __init__.py only.

Hidden cases of `masked_mean(tensor, mask, dim=None)`: every dim of 3-d tensors, bool / float /
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

from autograder.mistakes import Mistake


# ---------------------------------------------------------------- the hidden cases
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


# ---------------------------------------------------------------- the correct versions
CORRECT = {
    "where_sum_over_count": """
        import torch
        def masked_mean(tensor, mask, dim=None):
            kept = torch.where(mask.bool(), tensor, torch.zeros_like(tensor))
            count = mask.to(tensor.dtype)
            if dim is None:
                return kept.sum() / count.sum()
            return kept.sum(dim=dim) / count.sum(dim=dim)
    """,
    # NaN in the masked-out places, then the mean of what is left (nanmean: 0/0 = NaN for an empty row)
    "nanmean_over_kept_elements": """
        import torch
        def masked_mean(tensor, mask, dim=None):
            kept = torch.where(mask.bool(), tensor, torch.full_like(tensor, float("nan")))
            return kept.nanmean() if dim is None else kept.nanmean(dim=dim)
    """,
    "masked_fill_and_mask_sum": """
        import torch
        def masked_mean(tensor, mask, dim=None):
            keep = mask != 0
            total = tensor.masked_fill(~keep, 0.0).sum(dim=dim)
            return total / keep.sum(dim=dim)
    """,
    "float64_accumulation": """
        import torch
        def masked_mean(tensor, mask, dim=None):
            m = mask.bool()
            x = torch.where(m, tensor.double(), 0.0)
            n = m.double()
            out = x.sum() / n.sum() if dim is None else x.sum(dim) / n.sum(dim)
            return out.to(tensor.dtype)
    """,
    # boolean indexing, row by row: the mean of each row's kept entries (an empty row's mean is NaN)
    "loop_over_rows": """
        import torch
        def masked_mean(tensor, mask, dim=None):
            mask = mask.bool().expand_as(tensor)
            if dim is None:
                return tensor[mask].mean()
            x, m = tensor.movedim(dim, -1), mask.movedim(dim, -1)
            rows = [row[keep].mean() for row, keep in zip(x.reshape(-1, x.shape[-1]), m.reshape(-1, m.shape[-1]))]
            return torch.stack(rows).reshape(x.shape[:-1]) if rows else x.sum(-1)
    """,
}


# catalogued mistakes written another way: recognition is about what a function does, not its text
SAME_MISTAKES = {
    # the plain mean of the zero-filled tensor, summed in float64 and divided by the entry count
    "entry_count_in_float64": ("mean_including_the_masked_zeros", """
        import torch
        def masked_mean(tensor, mask, dim=None):
            kept = torch.where(mask.bool(), tensor.double(), 0.0)
            n = kept.numel() if dim is None else kept.shape[dim]
            total = kept.sum() if dim is None else kept.sum(dim=dim)
            return (total / n).to(tensor.dtype)
    """),
    # 0 for an empty slice chosen by torch.where instead of a clamped count
    "zero_where_the_count_is_0": ("masked_mean_zero_for_an_empty_row", """
        import torch
        def masked_mean(tensor, mask, dim=None):
            m = mask.bool()
            kept = torch.where(m, tensor, torch.zeros_like(tensor))
            total, count = (kept.sum(), m.sum()) if dim is None else (kept.sum(dim), m.sum(dim))
            return torch.where(count == 0, torch.zeros_like(total), total / count)
    """),
}


# ---------------------------------------------------------------- the known mistakes
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
