"""evaluate (notebook 05, `course_lib.rewards:evaluate`): the reference's contract. Its correct
versions and known mistakes are in grader.py (tests/test_graded.py runs them through the judge).
"""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from autograder.graded.evaluate import ScriptedEngine
from course_lib import gsm8k_to_r1_zero, load_problems, r1_zero_reward_fn
from course_lib.rewards import evaluate
from course_lib.rollouts import SamplingParams
from tests.helpers import PROPERTY_SETTINGS


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
