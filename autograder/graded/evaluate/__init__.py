"""How the judge calls `evaluate(engine, prompts, ground_truths, sampling_params,
reward_fn=r1_zero_reward_fn)` on a hidden case: `call` (fresh copies of the case's inputs in, named
outputs out) and its settings. Public: a student kit and the grading sandbox hold this file; the
cases, the correct versions and the known mistakes are grader.py's.
"""

from __future__ import annotations

import re

GRADED = "evaluate"
WARM = ('math_verify',)  # imported by a judge runner started ahead (autograder.judge)
TIMEOUT = 180


class ScriptedEngine:
    """A rollout engine that answers prompt p with `responses[p]` and records what it is asked."""

    def __init__(self, responses: dict[str, str]):
        self.responses = responses
        self.prompts: list[str] = []
        self.params: list[dict] = []

    def generate(self, prompts, params):
        from course_lib.rollouts.interface import Rollout

        seen = {"temperature": float(params.temperature), "top_p": float(params.top_p),
                "max_tokens": int(params.max_tokens), "stop": list(params.stop), "n": int(params.n),
                "seed": params.seed}
        if seen not in self.params:
            self.params.append(seen)
        out = []
        for p in prompts:
            self.prompts.append(p)
            text = self.responses[p]
            stopped = any(text.endswith(s) for s in params.stop)
            out += [Rollout(prompt=p, text=text, token_ids=list(range(len(text.split()))),
                            finish_reason="stop" if stopped else "length") for _ in range(params.n)]
        return out

    def load_weights(self, model):
        pass


def last_number_reward(response: str, ground_truth: str) -> dict[str, float]:
    """A caller's reward: format 1 when the response ends with </answer>; answer 1 when its last
    number is the ground truth, tags or not (so an answer can be right with the format wrong)."""
    numbers = re.findall(r"-?\d+", response)
    answer = 1.0 if numbers and numbers[-1] == str(ground_truth).strip() else 0.0
    return {"format_reward": 1.0 if response.strip().endswith("</answer>") else 0.0,
            "answer_reward": answer, "reward": answer}


def _reward_fn(name: str):
    from course_lib.rewards import r1_zero_reward_fn

    return {"r1_zero": r1_zero_reward_fn, "last_number": last_number_reward}[name]


def call(fn, inputs: dict) -> dict:
    from course_lib.rollouts.interface import SamplingParams

    engine = ScriptedEngine(dict(inputs["responses"]))
    params = SamplingParams(**inputs["params"])
    try:
        out = fn(engine, list(inputs["prompts"]), list(inputs["ground_truths"]), params, _reward_fn(inputs["reward"]))
    except ValueError:
        return {"raises_value_error": True}
    return {
        "responses": [r.text for r in out["rollouts"]],
        "rewards": [dict(r) for r in out["rewards"]],
        "categories": list(out["categories"]),
        "counts": dict(out["counts"]),
        **{k: out[k] for k in ("format_reward", "answer_reward", "reward")},
        "prompts_asked": engine.prompts,
        "params_seen": engine.params,
        "raises_value_error": False,
    }
