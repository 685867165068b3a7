"""How the judge calls `compute_group_normalized_rewards(reward_fn, rollout_responses,
repeated_ground_truths, group_size, advantage_eps, normalize_by_std) -> (advantages, raw_rewards,
metadata)` on a hidden case: `call` (fresh copies of the case's inputs in, named outputs out) and
its settings. Public: a student kit and the grading sandbox hold this file; the cases, the correct
versions and the known mistakes are grader.py's.
"""

from __future__ import annotations

GRADED = "compute_group_normalized_rewards"


def call(fn, inputs: dict) -> dict:
    table = inputs["table"]

    def reward_fn(response: str, ground_truth: str) -> dict[str, float]:
        return dict(table[(response, ground_truth)])

    advantages, raw_rewards, _metadata = fn(
        reward_fn, list(inputs["responses"]), list(inputs["ground_truths"]), inputs["group_size"],
        inputs["advantage_eps"], inputs["normalize_by_std"],
    )
    return {"advantages": advantages, "raw_rewards": raw_rewards}
