"""The known mistakes of `evaluate` (notebook 05): the catalogue `autograder.mistakes` describes."""

from __future__ import annotations

from autograder.mistakes import Mistake, edited


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
