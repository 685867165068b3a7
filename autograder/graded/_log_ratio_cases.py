"""The hidden cases the suites of the per-token KL estimators share (`kl_k1`, `kl_k2`, `kl_k3`):
log-prob pairs with a chosen log r = ref_log_probs - policy_log_probs, drawn in float64 and cast.

Grader side only: each folder's grader.py imports it, no harness (what student code sees) does;
`autograder.cases.fingerprint` covers it.
"""

from __future__ import annotations

import torch


class Draw:
    """Random log-ratios and cases from one generator."""

    def __init__(self, gen: torch.Generator):
        self.gen = gen

    def uniform(self, *shape, low=0.0, high=1.0) -> torch.Tensor:
        return low + (high - low) * torch.rand(*shape, generator=self.gen, dtype=torch.float64)

    def spread(self, *shape, scale=1.0, sign=0) -> torch.Tensor:
        """Gaussian log-ratios; sign +1 / -1: their absolute values with that sign."""
        x = torch.randn(*shape, generator=self.gen, dtype=torch.float64) * scale
        return x.abs() * sign if sign else x

    def case(self, log_r: torch.Tensor, dtype=torch.float32, level=4.0, offset=0.0, grad=True) -> dict:
        """Log-probs at or below 0 with ref - policy = log_r, and the weights of the gradient's sum."""
        policy = -offset - self.uniform(*log_r.shape, high=level) - log_r.clamp(min=0)
        ref = policy + log_r
        return {"policy_log_probs": policy.to(dtype), "ref_log_probs": ref.to(dtype),
                "weights": torch.randn(*log_r.shape, generator=self.gen, dtype=torch.float64).to(dtype), "grad": grad}


def common_cases(d: Draw) -> list[tuple[str, dict]]:
    """The cases of every estimator: both signs, near r = 1, log-probs near -110, float64, shapes."""
    near_one = 10 ** d.uniform(4, 16, low=-4.0, high=-3.0) * torch.where(d.uniform(4, 16) < 0.5, -1.0, 1.0)
    return [
        ("mixed_signs_float32_B4_T9", d.case(d.spread(4, 9))),
        ("positive_log_ratio_float32_3x7", d.case(d.spread(3, 7, scale=1.5, sign=1))),
        ("negative_log_ratio_float32_3x7", d.case(d.spread(3, 7, scale=1.5, sign=-1))),
        ("near_r_equal_1_float32_4x16", d.case(near_one, level=2.5, offset=0.5)),
        ("log_probs_near_minus_110_float32_3x6", d.case(d.spread(3, 6), level=10.0, offset=105.0)),
        ("float64_4x6", d.case(d.spread(4, 6), dtype=torch.float64)),
        ("vector_1d_T13", d.case(d.spread(13))),
        ("3d_2x3x5", d.case(d.spread(2, 3, 5))),
        ("T1_column_6x1", d.case(d.spread(6, 1))),
        ("no_grad_inputs_3x5", d.case(d.spread(3, 5), grad=False)),
        ("empty_0x7", d.case(d.spread(0, 7), grad=False)),
        ("B8_T128_float32", d.case(d.spread(8, 128, scale=0.5))),
    ]


def log_ratio_cases(gen: torch.Generator) -> list[tuple[str, dict]]:
    """The cases of k1 and k2: `common_cases` and log-ratios up to +-20."""
    d = Draw(gen)
    pm20 = d.uniform(4, 10, low=-20.0, high=20.0)
    pm20[0, 0], pm20[0, 1] = 20.0, -20.0
    return common_cases(d) + [("log_ratio_pm20_float32_4x10", d.case(pm20))]
