"""The grader's side of `compute_naive_policy_gradient_loss` (notebook 07): how its hidden cases are
drawn, the correct versions that must earn full marks and the known mistakes that must lose them,
each with the sentence a student reads (`autograder.mistakes`). Never in a student kit or the
grading sandbox, which hold the folder's __init__.py only.

Hidden cases of `compute_naive_policy_gradient_loss(raw_rewards_or_advantages, policy_log_probs)
-> (B, T)`.

Outputs: the per-token loss, and the gradient of a weighted sum of it with respect to the
log-probs (so a loss that is right in value but detached, or built from a copy, fails).

What the cases are built to catch: a flipped sign, a reward broadcast over the wrong dimension
(square cases with B = T, where `A.view(-1) * log_probs` or a (B,) advantage used as is runs
without an error and is wrong), rewards of both signs and zero, float64, B = 1 and T = 1.
"""

from __future__ import annotations

import torch

from autograder.mistakes import Mistake


# ---------------------------------------------------------------- the hidden cases
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


# ---------------------------------------------------------------- the correct versions
CORRECT = {
    "column_helper": """
        import torch
        def _as_column(x, name):
            if x.dim() == 1:
                return x[:, None]
            if x.dim() == 2 and x.shape[1] == 1:
                return x
            raise ValueError(f"{name} must have shape (B, 1) or (B,), got {tuple(x.shape)}")
        def compute_naive_policy_gradient_loss(raw_rewards_or_advantages, policy_log_probs):
            return -_as_column(raw_rewards_or_advantages, "raw_rewards_or_advantages") * policy_log_probs
    """,
    "reshape_minus_one_one": """
        import torch
        def compute_naive_policy_gradient_loss(raw_rewards_or_advantages, policy_log_probs):
            a = raw_rewards_or_advantages.reshape(-1, 1)  # (B,) or (B, 1) -> (B, 1)
            return -a * policy_log_probs
    """,
    "expand_then_negate": """
        import torch
        def compute_naive_policy_gradient_loss(raw_rewards_or_advantages, policy_log_probs):
            a = raw_rewards_or_advantages
            if a.dim() == 1:
                a = a.unsqueeze(-1)
            return torch.neg(a.expand_as(policy_log_probs) * policy_log_probs)
    """,
    "einsum": """
        import torch
        def compute_naive_policy_gradient_loss(raw_rewards_or_advantages, policy_log_probs):
            return torch.einsum("b,bt->bt", -raw_rewards_or_advantages.flatten(), policy_log_probs)
    """,
    "log_probs_times_minus_a": """
        import torch
        def compute_naive_policy_gradient_loss(raw_rewards_or_advantages, policy_log_probs):
            B = policy_log_probs.shape[0]
            return policy_log_probs * (-raw_rewards_or_advantages.view(B, 1))
    """,
}


# ---------------------------------------------------------------- the known mistakes
MISTAKES = {
    # gradient ascent on the loss: the policy learns to do worse
    "naive_sign_flipped": Mistake(
        "returns A * log pi without the minus sign: minimising it makes the policy worse",
        """
        import torch
        def compute_naive_policy_gradient_loss(raw_rewards_or_advantages, policy_log_probs):
            return raw_rewards_or_advantages.reshape(-1, 1) * policy_log_probs
    """,
        ["advantages_B3_T7", "binary_rewards_B6_T5"]),
    # view(-1) of a (B, 1) column broadcasts along the tokens: runs when B == T, and is wrong
    "naive_advantage_flattened": Mistake(
        "flattens the (B, 1) advantages to (B,), which broadcasts them along the tokens instead of the rows",
        """
        import torch
        def compute_naive_policy_gradient_loss(raw_rewards_or_advantages, policy_log_probs):
            return -raw_rewards_or_advantages.view(-1) * policy_log_probs
    """,
        ["square_B4_T4", "square_B5_T5_binary_rewards"]),
    # a (B,) vector used as is: broadcast along the tokens of a square batch
    "naive_vector_advantage_used_as_is": Mistake(
        "uses a (B,) advantage vector as it is, which broadcasts along the tokens instead of the rows",
        """
        import torch
        def compute_naive_policy_gradient_loss(raw_rewards_or_advantages, policy_log_probs):
            return -raw_rewards_or_advantages * policy_log_probs
    """,
        ["advantages_as_vector_square_B4_T4", "advantages_as_vector_B6_T9"]),
    # reduced over the tokens: the per-token loss is the contract (the step averages it)
    "mean_over_tokens": Mistake(
        "averages the loss over the tokens: the contract is the per-token (B, T) loss",
        """
        import torch
        def compute_naive_policy_gradient_loss(raw_rewards_or_advantages, policy_log_probs):
            return (-raw_rewards_or_advantages.reshape(-1, 1) * policy_log_probs).mean(dim=-1)
    """,
        ["advantages_B3_T7", "B1_T8"]),
    # REINFORCE on the probability, not its log: another gradient (-A * pi * grad log pi)
    "probabilities_instead_of_log_probs": Mistake(
        "multiplies the advantage by the probability instead of the log-probability",
        """
        import torch
        def compute_naive_policy_gradient_loss(raw_rewards_or_advantages, policy_log_probs):
            return -raw_rewards_or_advantages.reshape(-1, 1) * policy_log_probs.exp()
    """,
        ["advantages_B3_T7", "binary_rewards_B6_T5"]),
    # notebook 07's visible check: "keep the graph: no .detach()"
    "naive_log_probs_detached": Mistake(
        "detaches the log-probs, so the loss has the right value but no gradient",
        """
        import torch
        def compute_naive_policy_gradient_loss(raw_rewards_or_advantages, policy_log_probs):
            return -raw_rewards_or_advantages.reshape(-1, 1) * policy_log_probs.detach()
    """,
        ["advantages_B3_T7", "binary_rewards_B6_T5"],
        # it raises on every case that asks for no error (RuntimeError in backward: no graph):
        # an exception's class alone is no evidence of this mistake, so recognition cannot name it
        recognisable=False),
}
