"""evaluate (notebook 05, `course_lib.rewards:evaluate`): the reference's contract, correct versions
that earn full marks through the real judge, and realistic mistakes that lose them
(CONTRIBUTING.md, "Adding a graded function")."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autograder.mistakes.evaluate import EVAL_BASE
from autograder.suites.evaluate import ScriptedEngine
from course_lib import gsm8k_to_r1_zero, load_problems, r1_zero_reward_fn
from course_lib.rewards import evaluate
from course_lib.rollouts import SamplingParams
from tests.helpers import PROPERTY_SETTINGS, corpus_tests, many_draws_test

SUITE = "evaluate"
GREEDY = SamplingParams(temperature=0.0, max_tokens=64, stop=("</answer>",))


# ---------------------------------------------------------------- the reference
@pytest.fixture(scope="module")
def records():
    return [gsm8k_to_r1_zero(p) for p in load_problems("arith", "test")[:4]]


def test_reference_categories_counts_and_means(records):
    reasoning = [r["output"].split(" </think>")[0] for r in records]
    responses = [records[0]["output"],  # correct
                 f"{reasoning[1]} </think> <answer> {int(records[1]['ground_truth']) + 1} </answer>",  # answer wrong
                 f"{reasoning[2]} </think> <answer> {records[2]['ground_truth']}",  # no </answer>
                 f" Question: next?\nAnswer: {reasoning[3]}\n#### {records[3]['ground_truth']}"]  # a ramble, no tags
    prompts, truths = [r["prompt"] for r in records], [r["ground_truth"] for r in records]
    engine = ScriptedEngine(dict(zip(prompts, responses)))
    out = evaluate(engine, prompts, truths, GREEDY)
    assert engine.prompts == prompts  # each prompt once, in order
    assert [r.text for r in out["rollouts"]] == responses
    assert out["rewards"] == [r1_zero_reward_fn(r, t) for r, t in zip(responses, truths)]  # the response alone
    assert out["categories"] == ["correct", "answer_wrong", "format_wrong", "format_wrong"]
    assert out["counts"] == {"format_wrong": 2, "answer_wrong": 1, "correct": 1}
    assert (out["format_reward"], out["answer_reward"], out["reward"]) == (0.5, 0.25, 0.25)
    assert all(type(out[k]) is float for k in ("format_reward", "answer_reward", "reward"))


def test_reference_counts_keep_every_category(records):
    engine = ScriptedEngine({records[0]["prompt"]: records[0]["output"]})
    out = evaluate(engine, [records[0]["prompt"]], [records[0]["ground_truth"]], GREEDY)
    assert out["counts"] == {"format_wrong": 0, "answer_wrong": 0, "correct": 1}


@pytest.mark.parametrize("n_truths, params", [(3, GREEDY), (0, GREEDY), (4, SamplingParams(temperature=1.0, n=2))])
def test_reference_clear_errors(records, n_truths, params):
    prompts = [r["prompt"] for r in records][: 4 if n_truths else 0]
    engine = ScriptedEngine({r["prompt"]: r["output"] for r in records})
    with pytest.raises(ValueError):
        evaluate(engine, prompts, [r["ground_truth"] for r in records][:n_truths], params)
    assert engine.prompts == []  # nothing generated before the check


def bits_reward(response: str, ground_truth: str) -> dict:
    """A caller's reward read off the response "f a": format bit f, answer bit a (a right answer
    may come with a wrong format); the ground truth scales the reward, so it must be passed."""
    f, a = (float(c) for c in response.split())
    return {"format_reward": f, "answer_reward": a, "reward": a * float(ground_truth)}


@PROPERTY_SETTINGS
@given(st.lists(st.tuples(st.integers(0, 1), st.integers(0, 1), st.sampled_from(["1", "2"])), min_size=1, max_size=12))
def test_reference_with_any_reward_fn(rows):
    prompts = [f"prompt {i}" for i in range(len(rows))]
    engine = ScriptedEngine({p: f"{f} {a}" for p, (f, a, _) in zip(prompts, rows)})
    out = evaluate(engine, prompts, [t for _, _, t in rows], GREEDY, reward_fn=bits_reward)
    expected = ["format_wrong" if not f else "answer_wrong" if not a else "correct" for f, a, _ in rows]
    assert out["categories"] == expected
    assert out["counts"] == {c: expected.count(c) for c in ("format_wrong", "answer_wrong", "correct")}
    n = len(rows)
    assert out["format_reward"] == sum(f for f, _, _ in rows) / n
    assert out["answer_reward"] == sum(a for _, a, _ in rows) / n
    assert out["reward"] == sum(a * float(t) for _, a, t in rows) / n


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


test_correct_version_earns_full_marks, test_mistake_loses_its_points = corpus_tests(SUITE, CORRECT)
test_each_version_holds_on_many_draws = many_draws_test(SUITE, CORRECT)
