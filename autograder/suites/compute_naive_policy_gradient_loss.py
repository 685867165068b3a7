"""Hidden cases of `compute_naive_policy_gradient_loss(raw_rewards_or_advantages, policy_log_probs)
-> (B, T)`.

Outputs: the per-token loss, and the gradient of a weighted sum of it with respect to the
log-probs (so a loss that is right in value but detached, or built from a copy, fails).

What the cases are built to catch: a flipped sign, a reward broadcast over the wrong dimension
(square cases with B = T, where `A.view(-1) * log_probs` or a (B,) advantage used as is runs
without an error and is wrong), rewards of both signs and zero, float64, B = 1 and T = 1.
"""

from __future__ import annotations

import torch

GRADED = "compute_naive_policy_gradient_loss"


def make_inputs(gen: torch.Generator) -> list[tuple[str, dict]]:
    def case(B, T, kind="advantages", dtype=torch.float32, column=True):
        if kind == "binary_rewards":
            a = (torch.rand(B, 1, generator=gen) < 0.5).to(torch.float64)
            a[0, 0], a[-1, 0] = 0.0, 1.0  # both rewards in every draw: all-equal rewards hide a broadcast or a sign
        else:
            a = torch.randn(B, 1, generator=gen, dtype=torch.float64) * 1.5
            a[0, 0] = 0.0  # one response carries no signal
        log_probs = -torch.rand(B, T, generator=gen, dtype=torch.float64) * 6
        return {"a": (a if column else a.view(-1)).to(dtype), "log_probs": log_probs.to(dtype),
                "weights": torch.randn(B, T, generator=gen, dtype=torch.float64).to(dtype)}

    return [
        ("advantages_B3_T7", case(3, 7)),
        ("binary_rewards_B6_T5", case(6, 5, kind="binary_rewards")),
        ("square_B4_T4", case(4, 4)),
        ("square_B5_T5_binary_rewards", case(5, 5, kind="binary_rewards")),
        ("advantages_as_vector_B6_T9", case(6, 9, column=False)),
        ("advantages_as_vector_square_B4_T4", case(4, 4, column=False)),
        ("float64_B3_T6", case(3, 6, dtype=torch.float64)),
        ("B1_T8", case(1, 8)),
        ("T1_B5", case(5, 1)),
        ("B8_T64", case(8, 64)),
    ]


def call(fn, inputs: dict) -> dict:
    log_probs = inputs["log_probs"].clone().requires_grad_()
    loss = fn(inputs["a"].clone(), log_probs)
    (loss * inputs["weights"]).sum().backward()
    return {"loss": loss, "grad_log_probs": log_probs.grad}
