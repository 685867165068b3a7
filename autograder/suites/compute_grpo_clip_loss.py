"""Hidden cases of `compute_grpo_clip_loss(advantages, policy_log_probs, old_log_probs, cliprange)
-> (loss, metadata)`.

Outputs: the (B, T) per-token loss, the gradient of a weighted sum of it with respect to the
policy log-probs (zero exactly where the clipped term is the smaller one), and
`metadata["clipped"]`, the (B, T) bool tensor that is True where the clipped term is strictly the
smaller one.

What the cases are built to catch: a flipped sign, the clamp put on the advantage instead of
the ratio, max instead of min, the ratio inverted (old / new), a ratio computed as
exp(new) / exp(old) (0 / 0 = NaN for log-probs near -100 in float32), a clip mask that marks
every ratio outside [1 - eps, 1 + eps] whatever the sign of A (for A > 0 a small ratio is not
clipped), advantages of both signs and zero, several clip ranges, the on-policy case
(ratio 1), a (B,) advantage on a square batch, float64.
"""

from __future__ import annotations

import torch

GRADED = "compute_grpo_clip_loss"


def make_inputs(gen: torch.Generator) -> list[tuple[str, dict]]:
    def case(B, T, cliprange=0.2, spread=0.5, adv="mixed", dtype=torch.float32, column=True, on_policy=False,
             level=3.0, offset=0.0):
        old = -torch.rand(B, T, generator=gen, dtype=torch.float64) * level - offset
        # log ratio spread around 0: ratios from about exp(-spread) to exp(spread), both sides of the clip
        log_ratio = torch.zeros(B, T, dtype=torch.float64) if on_policy else (
            (torch.rand(B, T, generator=gen, dtype=torch.float64) * 2 - 1) * spread)
        if not on_policy and spread >= 0.3 and T >= 2:
            # every row has a ratio above 1 + eps and one below 1 - eps, whatever the seed
            log_ratio[:, 0], log_ratio[:, -1] = 0.9 * spread, -0.9 * spread
        new = old + log_ratio
        a = torch.randn(B, 1, generator=gen, dtype=torch.float64)
        if adv == "positive":
            a = a.abs() + 0.1
        elif adv == "negative":
            a = -a.abs() - 0.1
        else:  # both signs in every case, and one response with A = 0
            a[0, 0] = 0.0
            if B > 2:
                a[1, 0], a[2, 0] = a[1, 0].abs() + 0.1, -a[2, 0].abs() - 0.1
        return {"advantages": (a if column else a.view(-1)).to(dtype), "policy_log_probs": new.to(dtype),
                "old_log_probs": old.to(dtype), "cliprange": cliprange,
                "weights": torch.randn(B, T, generator=gen, dtype=torch.float64).to(dtype)}

    return [
        ("mixed_advantages_B4_T9_eps0.2", case(4, 9)),
        ("positive_advantages_B3_T12_eps0.2", case(3, 12, adv="positive")),
        ("negative_advantages_B3_T12_eps0.2", case(3, 12, adv="negative")),
        ("eps0.1_B5_T8", case(5, 8, cliprange=0.1)),
        ("eps0.5_wide_ratios_B4_T10", case(4, 10, cliprange=0.5, spread=1.5)),
        ("ratios_near_one_B3_T6", case(3, 6, spread=0.05)),
        ("on_policy_ratio_one_B4_T7", case(4, 7, on_policy=True)),
        ("log_probs_near_minus_100_B3_T6", case(3, 6, level=20.0, offset=90.0)),
        ("square_B5_T5", case(5, 5)),
        ("advantages_as_vector_square_B4_T4", case(4, 4, column=False)),
        ("float64_B3_T6", case(3, 6, dtype=torch.float64)),
        ("T1_B6", case(6, 1)),
        ("B1_T10", case(1, 10, adv="negative")),
        ("B8_T64_eps0.2", case(8, 64)),
    ]


def call(fn, inputs: dict) -> dict:
    log_probs = inputs["policy_log_probs"].clone().requires_grad_()
    loss, metadata = fn(inputs["advantages"].clone(), log_probs, inputs["old_log_probs"].clone(), inputs["cliprange"])
    (loss * inputs["weights"]).sum().backward()
    return {"loss": loss, "grad_policy_log_probs": log_probs.grad, "clipped": metadata["clipped"]}
