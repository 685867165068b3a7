"""The grader's side of `evaluate` (notebook 05, `course_lib.rewards:evaluate`): how its hidden cases
are drawn, the correct versions that must earn full marks and the known mistakes that must lose
them, each with the sentence a student reads (`autograder.mistakes`). Never in a student kit or the
grading sandbox, which hold the folder's __init__.py only.

Hidden cases of `evaluate(engine, prompts, ground_truths, sampling_params, reward_fn=r1_zero_reward_fn)`
(notebook 05).

The engine is scripted: it answers each prompt with the response the case gives for it (as a
`Rollout`, a stop or a length finish) and records every prompt and every sampling setting it is
asked for. Outputs: the responses of the returned rollouts, the per-example rewards, the
categories and their counts (all three keys, zeros included), the three mean rewards (Python
floats), the prompts the engine was asked for, in order, and the distinct sampling settings it
received (the caller's `SamplingParams`, unchanged). Cases: real r1_zero prompts with a correct
response, a wrong answer, a `\boxed{}` answer, a missing `</answer>` and no tags at all
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

import torch

from autograder.mistakes import edited, Mistake


# ---------------------------------------------------------------- the hidden cases
# each error case and the phrase of the reference's `Raises:` section that states it (tests/test_contracts.py)
RAISES = {
    "lengths_differ": "a different number of prompts and ground truths",
    "no_prompts": "no prompts",
    "n_samples_2": "sampling_params.n != 1",
}


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


# ---------------------------------------------------------------- the correct versions
EVAL_BASE = """
    from course_lib.rewards import r1_zero_reward_fn
    def evaluate(engine, prompts, ground_truths, sampling_params, reward_fn=r1_zero_reward_fn):
        if len(prompts) != len(ground_truths):
            raise ValueError("lengths differ")
        if not prompts:
            raise ValueError("no prompts")
        if sampling_params.n != 1:
            raise ValueError("one sample per prompt")
        rollouts = engine.generate(list(prompts), sampling_params)
        rewards = [reward_fn(r.text, gt) for r, gt in zip(rollouts, ground_truths)]
        categories = []
        for s in rewards:
            if s["format_reward"] == 0:
                categories.append("format_wrong")
            elif s["answer_reward"] == 0:
                categories.append("answer_wrong")
            else:
                categories.append("correct")
        counts = {c: categories.count(c) for c in ("format_wrong", "answer_wrong", "correct")}
        n = len(rewards)
        return {"rollouts": rollouts, "rewards": rewards, "categories": categories, "counts": counts,
                "format_reward": sum(s["format_reward"] for s in rewards) / n,
                "answer_reward": sum(s["answer_reward"] for s in rewards) / n,
                "reward": sum(s["reward"] for s in rewards) / n}
"""


CORRECT = {
    "lists_then_counts": EVAL_BASE,
    # one loop fills everything; the counts dict made with every key first
    "one_loop": """
        from course_lib.rewards import r1_zero_reward_fn
        def evaluate(engine, prompts, ground_truths, sampling_params, reward_fn=r1_zero_reward_fn):
            if not prompts or len(prompts) != len(ground_truths) or sampling_params.n != 1:
                raise ValueError("bad arguments")
            out = {"rollouts": engine.generate(prompts, sampling_params), "rewards": [], "categories": [],
                   "counts": dict.fromkeys(["format_wrong", "answer_wrong", "correct"], 0)}
            for rollout, truth in zip(out["rollouts"], ground_truths):
                score = reward_fn(rollout.text, truth)
                category = "format_wrong" if not score["format_reward"] else "answer_wrong" if not score["answer_reward"] else "correct"
                out["rewards"].append(score)
                out["categories"].append(category)
                out["counts"][category] += 1
            for key in ("format_reward", "answer_reward", "reward"):
                out[key] = float(sum(s[key] for s in out["rewards"]) / len(out["rewards"]))
            return out
    """,
    # a Counter read back for every category (zeros included); statistics.mean for the means
    "counter_and_statistics": """
        import statistics
        from collections import Counter
        from course_lib.rewards import CATEGORIES, r1_zero_reward_fn
        def categorize(score):
            if score["format_reward"] == 0:
                return "format_wrong"
            return "answer_wrong" if score["answer_reward"] == 0 else "correct"
        def evaluate(engine, prompts, ground_truths, sampling_params, reward_fn=r1_zero_reward_fn):
            if len(prompts) != len(ground_truths):
                raise ValueError(f"{len(prompts)} prompts but {len(ground_truths)} ground truths")
            if len(prompts) == 0:
                raise ValueError("no prompts")
            if sampling_params.n != 1:
                raise ValueError("n must be 1")
            rollouts = engine.generate(prompts, sampling_params)
            rewards = [reward_fn(rollout.text, truth) for rollout, truth in zip(rollouts, ground_truths)]
            categories = [categorize(s) for s in rewards]
            tally = Counter(categories)
            return {"rollouts": rollouts, "rewards": rewards, "categories": categories,
                    "counts": {c: tally[c] for c in CATEGORIES},
                    **{k: float(statistics.mean(s[k] for s in rewards)) for k in ("format_reward", "answer_reward", "reward")}}
    """,
    # the engine asked one prompt at a time (in order, the same params): slower, the same result
    "one_prompt_at_a_time": """
        from course_lib.rewards import r1_zero_reward_fn
        def evaluate(engine, prompts, ground_truths, sampling_params, reward_fn=r1_zero_reward_fn):
            if sampling_params.n != 1:
                raise ValueError("evaluate needs n = 1")
            if len(prompts) == 0 or len(prompts) != len(ground_truths):
                raise ValueError("need as many ground truths as prompts, and at least one")
            rollouts, rewards, categories = [], [], []
            counts = {"format_wrong": 0, "answer_wrong": 0, "correct": 0}
            for prompt, truth in zip(prompts, ground_truths):
                (rollout,) = engine.generate([prompt], sampling_params)
                r = reward_fn(rollout.text, truth)
                c = "correct"
                if r["format_reward"] == 0:
                    c = "format_wrong"
                elif r["answer_reward"] == 0:
                    c = "answer_wrong"
                rollouts.append(rollout)
                rewards.append(r)
                categories.append(c)
                counts[c] += 1
            n = len(prompts)
            return {"rollouts": rollouts, "rewards": rewards, "categories": categories, "counts": counts,
                    "format_reward": sum(r["format_reward"] for r in rewards) / n,
                    "answer_reward": sum(r["answer_reward"] for r in rewards) / n,
                    "reward": sum(r["reward"] for r in rewards) / n}
    """,
    # the means through a float32 tensor and .item(): a Python float within rounding of the truth
    "torch_mean_item": """
        import torch
        from course_lib.rewards import r1_zero_reward_fn
        def evaluate(engine, prompts, ground_truths, sampling_params, reward_fn=r1_zero_reward_fn):
            if len(prompts) != len(ground_truths) or len(prompts) < 1 or sampling_params.n != 1:
                raise ValueError("evaluate: bad arguments")
            rollouts = engine.generate(list(prompts), sampling_params)
            rewards = [reward_fn(r.text, gt) for r, gt in zip(rollouts, ground_truths)]
            table = torch.tensor([[s["format_reward"], s["answer_reward"], s["reward"]] for s in rewards])
            categories = ["format_wrong" if f == 0 else "answer_wrong" if a == 0 else "correct" for f, a, _ in table.tolist()]
            means = table.mean(dim=0).tolist()
            return {"rollouts": rollouts, "rewards": rewards, "categories": categories,
                    "counts": {c: categories.count(c) for c in ("format_wrong", "answer_wrong", "correct")},
                    "format_reward": means[0], "answer_reward": means[1], "reward": means[2]}
    """,
}


# ---------------------------------------------------------------- the known mistakes
MISTAKES = {
    # a right answer with the format wrong must be format_wrong (under the caller's reward)
    "answer_checked_before_format": Mistake(
        "checks the answer before the format, so a right answer in the wrong format counts as correct instead of format_wrong",
        edited(EVAL_BASE, (
            """            if s["format_reward"] == 0:
                categories.append("format_wrong")
            elif s["answer_reward"] == 0:
                categories.append("answer_wrong")
            else:
                categories.append("correct")""",
            """            if s["answer_reward"] == 1:
                categories.append("correct")
            elif s["format_reward"] == 0:
                categories.append("format_wrong")
            else:
                categories.append("answer_wrong")""")),
        ["callers_reward_fn"]),
    "r1_zero_reward_hard_coded": Mistake(
        "calls r1_zero_reward_fn instead of the reward_fn it is given",
        edited(EVAL_BASE, ("rewards = [reward_fn(r.text, gt)", "rewards = [r1_zero_reward_fn(r.text, gt)")),
        ["callers_reward_fn"]),
    "reward_arguments_swapped": Mistake(
        "calls reward_fn(ground_truth, response) instead of reward_fn(response, ground_truth)",
        edited(EVAL_BASE, ("reward_fn(r.text, gt)", "reward_fn(gt, r.text)")),
        ["r1_zero_every_kind"]),
    # the r1_zero prompt itself shows the tags: a ramble reads as well formatted
    "prompt_and_response_graded": Mistake(
        "grades the prompt and the response together, and the prompt's own tags make a ramble look well formatted",
        edited(EVAL_BASE, (
            "rewards = [reward_fn(r.text, gt) for r, gt in zip(rollouts, ground_truths)]",
            "rewards = [reward_fn(p + r.text, gt) for p, r, gt in zip(prompts, rollouts, ground_truths)]")),
        ["base_model_rambles_only"]),
    "counts_without_zeros": Mistake(
        "leaves a category with no response out of counts instead of counting it 0",
        edited(EVAL_BASE, (
            'counts = {c: categories.count(c) for c in ("format_wrong", "answer_wrong", "correct")}',
            "import collections\n        counts = dict(collections.Counter(categories))")),
        ["base_model_rambles_only"]),
    "answer_reward_over_well_formatted_only": Mistake(
        "averages the answer reward over the well-formatted responses only instead of over all of them",
        edited(EVAL_BASE, (
            '"answer_reward": sum(s["answer_reward"] for s in rewards) / n,',
            '"answer_reward": sum(s["answer_reward"] for s in rewards) / max(1, sum(s["format_reward"] for s in rewards)),')),
        ["r1_zero_every_kind"]),
    "own_sampling_params": Mistake(
        "generates with its own sampling settings instead of the sampling_params it is given",
        edited(EVAL_BASE, (
            "rollouts = engine.generate(list(prompts), sampling_params)",
            "from course_lib.rollouts import SamplingParams\n"
            "        rollouts = engine.generate(list(prompts), SamplingParams(temperature=0.0, max_tokens=sampling_params.max_tokens))")),
        ["unusual_sampling_settings"]),
    "zip_truncates_silently": Mistake(
        "accepts prompts and ground truths of different lengths (zip drops the rest) instead of raising ValueError",
        edited(EVAL_BASE, ('        if len(prompts) != len(ground_truths):\n            raise ValueError("lengths differ")\n', "")),
        ["lengths_differ"]),
    "means_as_tensors": Mistake(
        "returns the mean rewards as tensors instead of Python floats",
        edited(EVAL_BASE, (
            '"format_reward": sum(s["format_reward"] for s in rewards) / n,',
            '"format_reward": torch.tensor([s["format_reward"] for s in rewards]).mean(),'), (
            "    from course_lib.rewards import r1_zero_reward_fn\n", "    import torch\n    from course_lib.rewards import r1_zero_reward_fn\n")),
        ["one_prompt"]),
    # a prompt given twice is generated once: the caller asked for a response per prompt, not per distinct prompt
    "duplicate_prompts_generated_once": Mistake(
        "generates once for a prompt given twice, where each prompt needs a response of its own",
        edited(EVAL_BASE, (
            "rollouts = engine.generate(list(prompts), sampling_params)",
            "unique = list(dict.fromkeys(prompts))\n"
            "        by_prompt = dict(zip(unique, engine.generate(unique, sampling_params)))\n"
            "        rollouts = [by_prompt[p] for p in prompts]")),
        ["same_prompt_two_ground_truths"]),
    "rollouts_replaced_by_texts": Mistake(
        "returns the response texts where the rollouts themselves are asked",
        edited(EVAL_BASE, ('return {"rollouts": rollouts,', 'return {"rollouts": [r.text for r in rollouts],')),
        ["one_prompt"],
        # it raises on every case that asks for no error (AttributeError):
        # an exception's class alone is no evidence of this mistake, so recognition cannot name it
        recognisable=False),
    # the total reward decides the category: a well-formatted wrong answer becomes format_wrong
    "category_from_the_total_reward": Mistake(
        "decides format_wrong from the total reward, so a well-formatted wrong answer becomes format_wrong",
        edited(EVAL_BASE, (
            """            if s["format_reward"] == 0:
                categories.append("format_wrong")""",
            """            if s["reward"] == 0:
                categories.append("format_wrong")""")),
        ["r1_zero_every_kind"]),
}
