"""How the judge calls `dpo_loss(policy_chosen_log_probs, policy_rejected_log_probs,
ref_chosen_log_probs, ref_rejected_log_probs, beta) -> (loss, metadata)` on a hidden case: `call`
(fresh copies of the case's inputs in, named outputs out) and its settings. Public: a student kit
and the grading sandbox hold this file; the cases, the correct versions and the known mistakes are
grader.py's.
"""

from __future__ import annotations

GRADED = "dpo_loss"


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
