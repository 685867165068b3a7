"""Hidden cases of `approx_kl(policy_log_probs, old_log_probs, response_mask) -> ()`: the masked
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

GRADED = "approx_kl"


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


def call(fn, inputs: dict) -> dict:
    policy = inputs["policy_log_probs"].clone().requires_grad_(inputs["grad"])
    old = inputs["old_log_probs"].clone().requires_grad_(inputs["grad"])
    kl = fn(policy, old, inputs["response_mask"].clone())
    result = {"approx_kl": kl}
    if inputs["grad"]:
        kl.backward()
        result["grad_policy_log_probs"] = policy.grad
        result["grad_old_log_probs"] = old.grad
    return result
