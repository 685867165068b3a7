"""How the judge calls `on_policy_pairs(reward_fn, prompts, responses, ground_truths, group_size,
max_pairs_per_group=1) -> list[dict]` on a hidden case: `call` (fresh copies of the case's inputs
in, named outputs out) and its settings. Public: a student kit and the grading sandbox hold this
file; the cases, the correct versions and the known mistakes are grader.py's.
"""

from __future__ import annotations

import re

GRADED = "on_policy_pairs"


def last_number_reward(response: str, ground_truth: str) -> dict:
    """The caller's reward of the custom cases: {"reward": 1.0} when the response's last integer is the
    ground truth, 0.5 when the ground truth is one of its other integers, 0.0 otherwise."""
    numbers = re.findall(r"-?\d+", response)
    if numbers and numbers[-1] == ground_truth:
        return {"reward": 1.0}
    return {"reward": 0.5 if ground_truth in numbers else 0.0}


def call(fn, inputs: dict) -> dict:
    from course_lib import r1_zero_reward_fn

    reward_fn = {"r1_zero": r1_zero_reward_fn, "last_number": last_number_reward}[inputs["reward_fn"]]
    args = (reward_fn, list(inputs["prompts"]), list(inputs["responses"]), list(inputs["ground_truths"]),
            inputs["group_size"])
    kwargs = {} if inputs["max_pairs_per_group"] is None else {"max_pairs_per_group": inputs["max_pairs_per_group"]}
    if inputs["expect_error"]:
        try:
            fn(*args, **kwargs)
        except Exception as e:  # noqa: BLE001 - which exception is the output
            return {"raises": "ValueError" if isinstance(e, ValueError) else "other"}
        return {"raises": None}
    return {"pairs": fn(*args, **kwargs)}
