"""Hidden cases of `evaluate(engine, prompts, ground_truths, sampling_params, reward_fn=r1_zero_reward_fn)`
(notebook 05).

The engine is scripted: it answers each prompt with the response the case gives for it (as a
`Rollout`, a stop or a length finish) and records every prompt and every sampling setting it is
asked for. Outputs: the responses of the returned rollouts, the per-example rewards, the
categories and their counts (all three keys, zeros included), the three mean rewards (Python
floats), the prompts the engine was asked for, in order, and the distinct sampling settings it
received (the caller's `SamplingParams`, unchanged). Cases: real r1_zero prompts with a correct
response, a wrong answer, a `\\boxed{}` answer, a missing `</answer>` and no tags at all
(the prompt itself shows the tags: grading prompt + response counts a base model's ramble as
well formatted); a batch of base-model rambles only (no correct and no answer-wrong response);
a batch of correct responses only; a reward function of the caller's that is not
`r1_zero_reward_fn`, under which an answer can be right while the format is wrong (that
example's category is format_wrong) and which is not symmetric in its two arguments; unusual
sampling settings; one prompt; the same prompt twice with two different ground truths; and
three errors (ValueError): prompts and ground truths of different lengths, no prompts, and
sampling_params.n = 2.
"""

from __future__ import annotations

import re

import torch

GRADED = "evaluate"
# each error case and the phrase of the reference's `Raises:` section that states it (tests/test_contracts.py)
RAISES = {
    "lengths_differ": "a different number of prompts and ground truths",
    "no_prompts": "no prompts",
    "n_samples_2": "sampling_params.n != 1",
}
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


def make_inputs(gen: torch.Generator) -> list[tuple[str, dict]]:
    from course_lib import gsm8k_to_r1_zero, load_problems

    problems = load_problems("arith", "test")
    idx = torch.randperm(len(problems), generator=gen)[:12].tolist()
    records = [gsm8k_to_r1_zero(problems[i]) for i in idx]
    prompts = [r["prompt"] for r in records]
    truths = [r["ground_truth"] for r in records]

    def reasoning(r):  # the gold worked solution's thinking, as a model would write it
        return r["output"].split(" </think>")[0]

    def correct(r):
        return r["output"]

    def wrong(r):
        return f"{reasoning(r)} </think> <answer> {int(r['ground_truth']) + 7} </answer>"

    def boxed(r):
        return f"{reasoning(r)} </think> <answer> \\boxed{{{r['ground_truth']}}} </answer>"

    def unclosed(r):
        return f"{reasoning(r)} </think> <answer> {r['ground_truth']}"

    def ramble(r):  # what a base model writes: its pretraining style, no tags, the right number
        return f" Question: what next?\nAnswer: {reasoning(r).strip()}\n#### {r['ground_truth']}"

    def case(rows, makers, reward="r1_zero", params=None, truths_override=None):
        ps = [prompts[i] for i in rows]
        return {"prompts": ps, "ground_truths": truths_override or [truths[i] for i in rows],
                "responses": {prompts[i]: m(records[i]) for i, m in zip(rows, makers)},
                "reward": reward, "params": params or {"temperature": 0.0, "max_tokens": 100, "stop": ["</answer>"]}}

    custom = {"temperature": 0.7, "top_p": 0.9, "max_tokens": 17, "stop": ["</answer>", "\n\n"], "seed": 3}
    twice = case([0, 0], [correct, correct], truths_override=[truths[0], str(int(truths[0]) + 1)])
    return [
        ("r1_zero_every_kind", case([0, 1, 2, 3, 4, 5], [correct, wrong, boxed, unclosed, ramble, correct])),
        ("base_model_rambles_only", case([6, 7, 8], [ramble, ramble, ramble])),
        ("all_correct", case([9, 10], [correct, boxed])),
        ("callers_reward_fn", case([0, 1, 2, 3, 4], [ramble, correct, wrong, unclosed, boxed], reward="last_number")),
        ("unusual_sampling_settings", case([5, 6, 7], [wrong, correct, ramble], params=custom)),
        ("one_prompt", case([11], [wrong])),
        ("same_prompt_two_ground_truths", twice),
        ("lengths_differ", {**case([0, 1], [correct, wrong]), "ground_truths": [truths[0]]}),
        ("no_prompts", {**case([], []), "ground_truths": []}),
        ("n_samples_2", case([0, 1], [correct, wrong], params={"temperature": 1.0, "max_tokens": 100, "n": 2})),
    ]


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
