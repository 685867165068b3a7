"""Hidden cases of `dpo_loss(policy_chosen_log_probs, policy_rejected_log_probs, ref_chosen_log_probs,
ref_rejected_log_probs, beta) -> (loss, metadata)` (notebook 12):

    chosen_rewards = beta * (pi_c - ref_c),   rejected_rewards = beta * (pi_r - ref_r)
    loss = mean_b -logsigmoid(chosen_rewards - rejected_rewards)

The four (B,) inputs are sequence log-probs (all negative), built from a chosen beta * margin per
pair. Outputs: the loss, its gradients with respect to the two policy inputs, whether a gradient
reached a reference input, the metadata "chosen_rewards" and "rejected_rewards" ((B,) tensors),
"reward_margin" (a Python number: a 0-dim tensor or a float both do), "reward_accuracy" as the
number of wins it stands for (round(accuracy * B): exact, whatever precision the fraction is
computed in) and whether the two reward tensors are detached. Error cases must raise ValueError
(or a subclass); their output is {"raises": "ValueError"}, {"raises": "other"} (another exception)
or {"raises": None}.

What the cases are built to catch:

- `random_beta_*` (beta 0.01, 0.1, 0.5, 2; margins of both signs, rewards of both signs): the
  margin's sign flipped (chosen and rejected swapped), the reference term dropped (beta * pi), beta
  outside the logsigmoid, a sum over the batch instead of the mean, rewards without beta, a
  detached policy (no gradient), rewards returned with their graph;
- `large_negative_margin_*` (beta * margin of -200 and -1000, in float32 and float64):
  log(sigmoid(x)) (sigmoid underflows to 0, its log to -inf: an infinite loss, NaN gradients) and
  log(1 + exp(-x)) (exp overflows), torch.where of the two stable branches (the branch not taken
  overflows, and its NaN gradient leaks through); `large_positive_margin_*`: the same formulas on
  the other side;
- `policy_equals_reference_*` (the first step: margins exactly 0, loss log 2) and
  `ties_and_wins_*`: `>=` in the reward accuracy (a tie is no win), softplus written by hand as
  max(-x, 0) + log1p(exp(-|x|)) (right values, but at x = 0 a gradient twice too large);
- `ref_requires_grad_*`: reference inputs that require gradients (a reference scored with
  gradients by mistake): a gradient must not reach them (not detached: it would train the frozen
  copy's log-probs);
- `float64_*`: float64 computed or returned in float32; gradients of every case: a detached policy;
- errors: (B, 1) inputs, a reference of another length (and one of length 1, which torch would
  broadcast silently), beta 0 and beta < 0.

The tolerance is measured from the reference and one grader-only variant that subtracts the
policies first (another correct order of subtraction, with another float32 rounding of the margin).
"""

from __future__ import annotations

import torch

GRADED = "dpo_loss"
# each error case and the phrase of the reference's `Raises:` section that states it (tests/test_contracts.py)
RAISES = {
    "error_inputs_B_by_1": "a (B, 1) input",
    "error_ref_of_another_length": "a reference of another length",
    "error_ref_of_length_1_broadcasts": "even one of length 1 that torch would broadcast",
    "error_beta_0": "beta <= 0",
    "error_beta_negative": "beta <= 0",
}
# grader-only: the margin with the policies subtracted first, a rounding of its own in float32
VARIANTS = ["autograder.suites.dpo_loss:variant_policies_subtracted_first"]


def make_inputs(gen: torch.Generator) -> list[tuple[str, dict]]:
    def uniform(n, lo, hi):
        return lo + (hi - lo) * torch.rand(n, generator=gen, dtype=torch.float64)

    def pairs(x, beta, dtype=torch.float32, ref_requires_grad=False, expect_error=False):
        """Four (B,) log-prob tensors with beta * ((pi_c - ref_c) - (pi_r - ref_r)) = x, all negative."""
        d = x / beta
        share = uniform(len(x), 0.3, 0.7)
        chosen_ratio = d * share + torch.randn(len(x), generator=gen, dtype=torch.float64)  # pi_c - ref_c
        rejected_ratio = chosen_ratio - d  # pi_r - ref_r
        top_c, top_r = -uniform(len(x), 5.0, 60.0), -uniform(len(x), 5.0, 60.0)
        pc = top_c + chosen_ratio.clamp(max=0)
        rc = pc - chosen_ratio
        pr = top_r + rejected_ratio.clamp(max=0)
        rr = pr - rejected_ratio
        return {"policy_chosen_log_probs": pc.to(dtype), "policy_rejected_log_probs": pr.to(dtype),
                "ref_chosen_log_probs": rc.to(dtype), "ref_rejected_log_probs": rr.to(dtype), "beta": beta,
                "ref_requires_grad": ref_requires_grad, "expect_error": expect_error}

    def random_margins(B, beta, scale=6.0):
        """beta * margin for log-ratio margins of a few nats, both signs, never within 0.05 of a tie."""
        m = torch.randn(B, generator=gen, dtype=torch.float64) * scale
        m = torch.where(m.abs() < 0.05, m.sign() * 0.05 + m, m)
        m[-1], m[0] = -m[-1].abs() - 0.05, m[0].abs() + 0.05  # a win and a loss in every batch (B = 1: a win)
        return beta * m

    def fixed(values, beta, **kw):
        x = torch.tensor(values, dtype=torch.float64) + uniform(len(values), -0.5, 0.5)
        return pairs(x, beta, **kw)

    same = pairs(random_margins(6, 0.1), 0.1)
    same["ref_chosen_log_probs"] = same["policy_chosen_log_probs"].clone()
    same["ref_rejected_log_probs"] = same["policy_rejected_log_probs"].clone()
    ties = pairs(random_margins(6, 0.1), 0.1)
    for i in (1, 3, 4):
        ties["ref_chosen_log_probs"][i] = ties["policy_chosen_log_probs"][i]
        ties["ref_rejected_log_probs"][i] = ties["policy_rejected_log_probs"][i]

    def bad(change, beta=0.1):
        c = pairs(random_margins(4, 0.1), beta, expect_error=True)
        return change(c) or c

    return [
        ("random_beta_0.01_B8", pairs(random_margins(8, 0.01, scale=20.0), 0.01)),
        ("random_beta_0.1_B8", pairs(random_margins(8, 0.1), 0.1)),
        ("random_beta_0.5_B6", pairs(random_margins(6, 0.5), 0.5)),
        ("random_beta_2_B5", pairs(random_margins(5, 2.0, scale=2.0), 2.0)),
        ("large_negative_margin_minus_200_mixed_float32_B4", fixed([-200.0, 1.5, -200.0, -0.7], 0.1)),
        ("large_negative_margin_minus_1000_float32_B3", fixed([-1000.0, -1000.0, -1000.0], 0.5)),
        ("large_negative_margin_minus_1000_float64_B3", fixed([-1000.0, 2.0, -1000.0], 0.5, dtype=torch.float64)),
        ("large_positive_margin_plus_200_float32_B4", fixed([200.0, 200.0, -1.2, 200.0], 0.1)),
        ("large_positive_margin_plus_1000_float64_B3", fixed([1000.0, 1000.0, 0.8], 0.5, dtype=torch.float64)),
        ("policy_equals_reference_B6", same),
        ("ties_and_wins_B6", ties),
        ("float64_random_beta_0.1_B7", pairs(random_margins(7, 0.1), 0.1, dtype=torch.float64)),
        ("ref_requires_grad_beta_0.1_B6", pairs(random_margins(6, 0.1), 0.1, ref_requires_grad=True)),
        ("ref_requires_grad_float64_beta_0.5_B4", pairs(random_margins(4, 0.5), 0.5, dtype=torch.float64,
                                                        ref_requires_grad=True)),
        ("B1_beta_0.1", pairs(random_margins(1, 0.1), 0.1)),
        ("B32_beta_0.1", pairs(random_margins(32, 0.1), 0.1)),
        ("error_inputs_B_by_1", bad(lambda c: c.update({k: v[:, None] for k, v in c.items()
                                                         if isinstance(v, torch.Tensor)}))),
        ("error_ref_of_another_length", bad(lambda c: c.update(ref_rejected_log_probs=c["ref_rejected_log_probs"][:3]))),
        ("error_ref_of_length_1_broadcasts", bad(lambda c: c.update(ref_chosen_log_probs=c["ref_chosen_log_probs"][:1]))),
        ("error_beta_0", bad(lambda c: None, beta=0.0)),
        ("error_beta_negative", bad(lambda c: None, beta=-0.1)),
    ]


def variant_policies_subtracted_first(policy_chosen_log_probs, policy_rejected_log_probs, ref_chosen_log_probs,
                                      ref_rejected_log_probs, beta):
    """Grader-only: beta * ((pi_c - pi_r) - (ref_c - ref_r)), a correct order of subtraction whose float32
    rounding differs from the reference's (each reward first)."""
    import torch.nn.functional as F

    from course_lib import dpo_loss

    dpo_loss(policy_chosen_log_probs, policy_rejected_log_probs, ref_chosen_log_probs, ref_rejected_log_probs,
             beta)  # the reference's ValueErrors on the error cases
    ref_c, ref_r = ref_chosen_log_probs.detach(), ref_rejected_log_probs.detach()
    margins = beta * ((policy_chosen_log_probs - policy_rejected_log_probs) - (ref_c - ref_r))
    chosen, rejected = beta * (policy_chosen_log_probs - ref_c), beta * (policy_rejected_log_probs - ref_r)
    metadata = {"chosen_rewards": chosen.detach(), "rejected_rewards": rejected.detach(),
                "reward_margin": margins.detach().mean(), "reward_accuracy": (margins.detach() > 0).float().mean()}
    return -F.logsigmoid(margins).mean(), metadata


def call(fn, inputs: dict) -> dict:
    pc = inputs["policy_chosen_log_probs"].clone().requires_grad_()
    pr = inputs["policy_rejected_log_probs"].clone().requires_grad_()
    rc = inputs["ref_chosen_log_probs"].clone().requires_grad_(inputs["ref_requires_grad"])
    rr = inputs["ref_rejected_log_probs"].clone().requires_grad_(inputs["ref_requires_grad"])
    if inputs["expect_error"]:
        try:
            fn(pc, pr, rc, rr, inputs["beta"])
        except Exception as e:  # noqa: BLE001 - which exception is the output
            return {"raises": "ValueError" if isinstance(e, ValueError) else "other"}
        return {"raises": None}
    loss, metadata = fn(pc, pr, rc, rr, inputs["beta"])
    loss.backward()
    chosen, rejected = metadata["chosen_rewards"], metadata["rejected_rewards"]
    return {
        "loss": loss,
        "grad_policy_chosen": pc.grad,
        "grad_policy_rejected": pr.grad,
        "ref_got_gradient": any(t.grad is not None and bool(t.grad.any()) for t in (rc, rr)),
        "chosen_rewards": chosen,
        "rejected_rewards": rejected,
        "rewards_detached": not (chosen.requires_grad or rejected.requires_grad),
        "reward_margin": float(metadata["reward_margin"]),
        # the accuracy as a count of wins: exact whatever the precision the fraction is computed in
        "reward_accuracy_wins": round(float(metadata["reward_accuracy"]) * len(pc)),
    }
