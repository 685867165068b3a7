"""The grader's side of `approx_kl` (notebook 10): how its hidden cases are drawn, the correct versions
that must earn full marks and the known mistakes that must lose them, each with the sentence a
student reads (`autograder.mistakes`). Never in a student kit or the grading sandbox, which hold the
folder's __init__.py only.

Hidden cases of `approx_kl(policy_log_probs, old_log_probs, response_mask) -> ()`: the masked
mean of 0.5 * (log pi - log pi_old)^2 over the response tokens, sum(...) / max(mask.sum(), 1),
on rows of different lengths (prompt and padding masked), bool / long / int / float masks, an
all-zero mask (0), a row without a response token, large finite log-probs under the mask,
float64, and 1-d, 3-d and large shapes.

Outputs: the scalar and, except on the all-zero mask, the gradients of it with respect to both
log-prob inputs ((log pi - log pi_old) * mask / count, and its negative). On the all-zero mask
the value alone is compared: its gradient is exactly 0, and a division guarded by `torch.where`
(an unselected 0 / 0) gives NaN there, which is no part of the value's contract.

What the cases are built to catch:

- `rows_of_different_lengths_*`, `one_row_without_response_*`, `prompt_and_padding_masked_*`:
  the mean of per-row means (a short row's tokens weigh more than a long row's; a row without
  response tokens gives 0 / 0 or a 0 that drags the mean down), while every response token must
  weigh the same; a count over every position (the mask's size) instead of the mask's sum;
- `masked_positions_hold_large_values_*` (log-prob differences of 1e3 where the mask is 0): a
  mean over every position, the mask left out of the numerator;
- `all_zero_mask_gives_0_*`: a division by mask.sum() without the clamp (0 / 0 = NaN);
- `long_mask_*`, `int_mask_*`, `float_mask_*`: `d[response_mask]` with a mask that is not bool
  (it indexes rows instead of selecting tokens, or raises);
- `bool_mask_*` and every other case: the 0.5 dropped, k1 (the mean log ratio, the classic
  PPO monitor) or k3 in the place of k2, a sign of the gradient;
- `float64_*`: float64 computed in float32 (or returned as float32);
- `vector_1d_*`, `3d_*`, `B8_T128_*`: the contract's shapes (...), not only (B, T).
"""

from __future__ import annotations

import torch

from autograder.mistakes import edited, Mistake


# ---------------------------------------------------------------- the hidden cases
def make_inputs(gen: torch.Generator) -> list[tuple[str, dict]]:
    def log_probs(*shape, spread=0.3):
        """(policy, old): old log-probs in (-4, -0.1), the policy moved by N(0, spread^2)."""
        old = -0.1 - 3.9 * torch.rand(*shape, generator=gen, dtype=torch.float64)
        return old + spread * torch.randn(*shape, generator=gen, dtype=torch.float64), old

    def case(policy, old, mask, dtype=torch.float32, grad=True):
        return {"policy_log_probs": policy.to(dtype), "old_log_probs": old.to(dtype), "response_mask": mask,
                "grad": grad}

    def spans(T, starts, lengths):
        """A (B, T) bool mask: row i keeps tokens starts[i] .. starts[i] + lengths[i] - 1."""
        m = torch.zeros(len(starts), T, dtype=torch.bool)
        for i, (s, n) in enumerate(zip(starts, lengths)):
            m[i, s:s + n] = True
        return m

    def rand_mask(*shape, p=0.6):
        """Random, with at least one kept token in each row and one dropped in the first."""
        m = torch.rand(*shape, generator=gen) < p
        m[..., 0] = True
        m.view(-1, shape[-1])[0, -1] = False
        return m

    # a short row that moved far, long rows that moved little: the mean of row means is ~4x the token mean
    policy_rows, old_rows = log_probs(4, 12, spread=0.2)
    sign = torch.where(torch.rand(2, generator=gen) < 0.5, -1.0, 1.0).double()
    policy_rows[0, :2] = old_rows[0, :2] + sign * (1.5 + torch.rand(2, generator=gen, dtype=torch.float64))
    empty_row = log_probs(3, 6)
    large = log_probs(3, 8)
    large_mask = rand_mask(3, 8)
    large_mask[:, -2:] = False  # at least two positions per row, whatever the draw
    large[0][~large_mask] = -1e3 + 10 * torch.randn(int((~large_mask).sum()), generator=gen, dtype=torch.float64)
    return [
        ("rows_of_different_lengths_B4_T12", case(policy_rows, old_rows, spans(12, [0, 0, 0, 0], [2, 12, 5, 9]))),
        ("prompt_and_padding_masked_B4_T16", case(*log_probs(4, 16), spans(16, [3, 1, 6, 2], [10, 4, 9, 14]))),
        ("one_row_without_response_B3_T6", case(*empty_row, spans(6, [0, 2, 1], [5, 0, 3]))),
        ("bool_mask_B3_T9", case(*log_probs(3, 9), rand_mask(3, 9))),
        ("long_mask_B3_T9", case(*log_probs(3, 9), rand_mask(3, 9).long())),
        ("int_mask_B4_T7", case(*log_probs(4, 7), rand_mask(4, 7).int())),
        ("float_mask_B3_T9", case(*log_probs(3, 9), rand_mask(3, 9).float())),
        ("all_zero_mask_gives_0_B3_T5", case(*log_probs(3, 5), torch.zeros(3, 5, dtype=torch.bool), grad=False)),
        ("masked_positions_hold_large_values_B3_T8", case(*large, large_mask)),
        ("all_one_mask_B3_T5", case(*log_probs(3, 5), torch.ones(3, 5, dtype=torch.bool))),
        ("float64_B4_T6", case(*log_probs(4, 6), rand_mask(4, 6), dtype=torch.float64)),
        ("float64_float_mask_B3_T7", case(*log_probs(3, 7), rand_mask(3, 7).double(), dtype=torch.float64)),
        ("vector_1d_T11", case(*log_probs(11), rand_mask(11))),
        ("3d_2x3x5", case(*log_probs(2, 3, 5), rand_mask(2, 3, 5))),
        ("B8_T128_float32", case(*log_probs(8, 128, spread=0.1),
                                 spans(128, [5, 0, 17, 3, 40, 9, 1, 60], [100, 128, 30, 77, 88, 2, 50, 68]))),
    ]


# ---------------------------------------------------------------- the correct versions
# the correct version 'where_sum_over_clamped_count' (autograder/graded/approx_kl/test_approx_kl.py), which the edits start from
WHERE = """
        import torch
        def approx_kl(policy_log_probs, old_log_probs, response_mask):
            keep = response_mask.bool()
            sq = 0.5 * (policy_log_probs - old_log_probs) ** 2
            kept = torch.where(keep, sq, torch.zeros_like(sq))
            return kept.sum() / keep.sum().clamp(min=1)
    """

RETURN = "return kept.sum() / keep.sum().clamp(min=1)"

SQ = "sq = 0.5 * (policy_log_probs - old_log_probs) ** 2"


CORRECT = {
    "where_sum_over_clamped_count": WHERE,
    # (d * m)^2 = d^2 * m for a 0/1 mask
    "square_of_masked_difference": """
        import torch
        def approx_kl(policy_log_probs, old_log_probs, response_mask):
            d = (policy_log_probs - old_log_probs) * response_mask
            n = max(int(response_mask.sum()), 1)
            return (d ** 2).sum() / (2 * n)
    """,
    "boolean_indexing": """
        import torch
        def approx_kl(policy_log_probs, old_log_probs, response_mask):
            keep = response_mask != 0
            d = policy_log_probs[keep] - old_log_probs[keep]
            return 0.5 * d.pow(2).sum() / max(d.numel(), 1)
    """,
    # row by row: each row's sum of squares and its count, divided once at the end
    "loop_over_rows": """
        import torch
        def approx_kl(policy_log_probs, old_log_probs, response_mask):
            T = policy_log_probs.shape[-1]
            new = policy_log_probs.reshape(-1, T)
            old = old_log_probs.reshape(-1, T)
            mask = response_mask.reshape(-1, T).bool()
            total = torch.zeros((), dtype=policy_log_probs.dtype)
            count = 0
            for n, o, m in zip(new, old, mask):
                d = n[m] - o[m]
                total = total + 0.5 * (d * d).sum()
                count += int(m.sum())
            return total / max(count, 1)
    """,
    "float64_inside": """
        import torch
        def approx_kl(policy_log_probs, old_log_probs, response_mask):
            m = response_mask.double()
            d = policy_log_probs.double() - old_log_probs.double()
            kl = (0.5 * d * d * m).sum() / m.sum().clamp(min=1.0)
            return kl.to(policy_log_probs.dtype)
    """,
}


# catalogued mistakes written another way: recognition is about what a function does, not its text
SAME_MISTAKES = {
    # each row's mean in float64, in a Python loop over the rows of every leading dimension, then their mean
    "row_means_in_a_loop_float64": ("mean_of_per_row_means", """
        import torch
        def approx_kl(policy_log_probs, old_log_probs, response_mask):
            T = policy_log_probs.shape[-1]
            rows = zip(policy_log_probs.reshape(-1, T), old_log_probs.reshape(-1, T), response_mask.bool().reshape(-1, T))
            means = []
            for lp, old, m in rows:
                d = (lp.double() - old.double())[m]
                means.append((0.5 * d ** 2).sum() / max(int(m.sum()), 1))
            return torch.stack(means).mean().to(policy_log_probs.dtype)
    """),
    # d * d without the half, selected by torch.where
    "squared_difference_without_the_half": ("half_dropped", """
        import torch
        def approx_kl(policy_log_probs, old_log_probs, response_mask):
            m = response_mask != 0
            d = policy_log_probs - old_log_probs
            return torch.where(m, d * d, torch.zeros_like(d)).sum() / m.sum().clamp(min=1)
    """),
}


# ---------------------------------------------------------------- the known mistakes
MISTAKES = {
    # divided by every position, not by the response tokens
    "mean_over_all_positions": Mistake(
        "divides by every position, not by the number of response tokens",
        edited(WHERE, (RETURN, "return kept.mean()")),
        ["rows_of_different_lengths_B4_T12", "bool_mask_B3_T9"]),
    # the mask never used: padding's garbage log-probs enter the mean
    "mask_ignored": Mistake(
        "never uses the mask, so the prompt's and the padding's log-probs enter the mean",
        edited(WHERE, (RETURN, "return sq.mean()")),
        ["masked_positions_hold_large_values_B3_T8", "prompt_and_padding_masked_B4_T16"]),
    # each row's mean, then the mean of the rows: a short row's tokens weigh more
    "mean_of_per_row_means": Mistake(
        "averages each row, then the rows: a short response's tokens weigh more than a long one's",
        edited(WHERE, (RETURN, "return (kept.sum(-1) / keep.sum(-1).clamp(min=1)).mean()")),
        ["rows_of_different_lengths_B4_T12", "one_row_without_response_B3_T6"]),
    # (log r)^2 without the 0.5: twice the monitor
    "half_dropped": Mistake(
        "drops the 0.5: (log r)^2 instead of (log r)^2 / 2, twice the monitor",
        edited(WHERE, (SQ, "sq = (policy_log_probs - old_log_probs) ** 2")),
        ["bool_mask_B3_T9", "float64_B4_T6"]),
    # no clamp: 0 / 0 = NaN when no token is a response token
    "nan_on_an_all_zero_mask": Mistake(
        "divides by the raw token count, so a mask with no response token gives 0 / 0 = NaN instead of 0",
        edited(WHERE, (RETURN, "return kept.sum() / keep.sum()")),
        ["all_zero_mask_gives_0_B3_T5"]),
    # the classic PPO monitor, mean(log pi_old - log pi): k1, not the k2 of the contract
    "k1_mean_log_ratio": Mistake(
        "averages log pi_old - log pi (the k1 estimator) instead of (log pi - log pi_old)^2 / 2",
        edited(WHERE, (SQ, "sq = old_log_probs - policy_log_probs")),
        ["bool_mask_B3_T9", "rows_of_different_lengths_B4_T12"]),
    # k3 = r - log r - 1 in the place of k2
    "k3_instead_of_k2": Mistake(
        "averages k3 = r - log r - 1 instead of k2 = (log r)^2 / 2",
        edited(WHERE, (
            SQ, "sq = torch.expm1(old_log_probs - policy_log_probs) - (old_log_probs - policy_log_probs)")),
        ["rows_of_different_lengths_B4_T12"]),
    # indexing with the mask as given: a long mask indexes rows 0 and 1, a float mask raises
    "indexes_with_the_mask_as_given": Mistake(
        "indexes with the mask as given: a long mask indexes rows, a float mask raises, instead of selecting tokens",
        """
        import torch
        def approx_kl(policy_log_probs, old_log_probs, response_mask):
            d = policy_log_probs[response_mask] - old_log_probs[response_mask]
            return 0.5 * d.pow(2).sum() / max(d.numel(), 1)
    """,
        ["long_mask_B3_T9", "int_mask_B4_T7", "float_mask_B3_T9"]),
    # float64 log-probs must give a float64 monitor
    "always_float32": Mistake(
        "computes in float32 whatever the input: float64 log-probs must give a float64 value",
        edited(WHERE, (SQ, "sq = 0.5 * (policy_log_probs.float() - old_log_probs.float()) ** 2")),
        ["float64_B4_T6", "float64_float_mask_B3_T7"]),
}
