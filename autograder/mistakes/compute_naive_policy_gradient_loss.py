"""The known mistakes of `compute_naive_policy_gradient_loss` (notebook 07): the catalogue `autograder.mistakes` describes."""

from __future__ import annotations

from autograder.mistakes import Mistake


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
