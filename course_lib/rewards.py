"""The r1_zero reward, and `evaluate`, which grades a model's responses with a reward.

`r1_zero_reward_fn` scores the format (`... </think> <answer> X </answer>`) and the answer.
Answers are compared as mathematics, not as strings: "1,080" equals "1080", "\\boxed{72}" equals
"72", "0.5" equals "1/2". A cheap normalised comparison runs first; the maintained verifier
`math-verify` (sympy underneath) decides everything else.

`evaluate` (graded in notebook 05) samples one response per prompt from a rollout engine, grades
each with a reward function and sorts it into one of three categories: format wrong, answer
wrong, correct. The trainers' evaluation (`course_lib.training.evaluation`) is built on it.
"""

from __future__ import annotations

import re
import threading
from fractions import Fraction
from typing import Callable

_THOUSANDS_COMMA = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
_NUMBER = re.compile(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:/\d+)?")


def _normalize(answer: str) -> str:
    """Strip what never changes a value: spaces, `$`, thousands commas, a trailing full stop."""
    s = answer.strip().strip("$").strip()
    s = _THOUSANDS_COMMA.sub("", s)
    s = s.rstrip(".").strip()
    return s


def _as_fraction(s: str) -> Fraction | None:
    """A plain number ("72", "-0.5", "3/4") as an exact Fraction, else None."""
    if not _NUMBER.fullmatch(s):
        return None
    try:
        return Fraction(s)
    except (ValueError, ZeroDivisionError):
        return None


def _math_verify_equal(gold: str, pred: str) -> bool:
    """Ask math-verify; it uses SIGALRM time-outs, which only work on the main thread."""
    from math_verify import parse, verify

    on_main = threading.current_thread() is threading.main_thread()
    timeout = 5 if on_main else None
    try:
        gold_parsed = parse(f"${gold}$", parsing_timeout=timeout)
        pred_parsed = parse(pred if "\\boxed" in pred else f"${pred}$", parsing_timeout=timeout)
        if not gold_parsed or not pred_parsed:
            return False
        return bool(verify(gold_parsed, pred_parsed, timeout_seconds=timeout))
    except Exception:  # a verifier failure on odd text is a wrong answer, never a crash
        return False


def grade_answer(pred: str, gold: str) -> bool:
    """True when `pred` and `gold` denote the same value."""
    p, g = _normalize(pred), _normalize(gold)
    if not p:
        return False
    if p == g:
        return True
    pf, gf = _as_fraction(p), _as_fraction(g)
    if pf is not None and gf is not None:
        return pf == gf
    return _math_verify_equal(g, p)


def extract_answer_block(response: str) -> str | None:
    """The text inside the last `<answer> ... </answer>`, or None when the format is broken."""
    if "</think> <answer>" not in response:
        return None
    start = response.rfind("<answer>")
    end = response.find("</answer>", start)
    if end < 0:
        return None
    return response[start + len("<answer>") : end]


def r1_zero_reward_fn(response: str, ground_truth: str) -> dict[str, float]:
    """Grade one response that continues the r1_zero prompt (which ends in "<think>").

    Returns {"format_reward", "answer_reward", "reward"}, each 0.0 or 1.0:
    - format 1 when the response holds "</think> <answer>" and a closing "</answer>";
    - answer 1 when, besides, the answer block equals `ground_truth` as a value;
    - reward = answer reward (a well-formed wrong answer earns nothing, so the format alone
      cannot be farmed).
    """
    answer = extract_answer_block(response)
    if answer is None:
        return {"format_reward": 0.0, "answer_reward": 0.0, "reward": 0.0}
    correct = grade_answer(answer, str(ground_truth))
    value = 1.0 if correct else 0.0
    return {"format_reward": 1.0, "answer_reward": value, "reward": value}


CATEGORIES = ("format_wrong", "answer_wrong", "correct")


def evaluate(
    engine,
    prompts: list[str],
    ground_truths: list[str],
    sampling_params,
    reward_fn: Callable[[str, str], dict[str, float]] = r1_zero_reward_fn,
) -> dict:
    """Generate one response per prompt, grade each with `reward_fn`, and sort it into a category.

        rollouts   = engine.generate(prompts, sampling_params)       # one per prompt, in order
        rewards[i] = reward_fn(rollouts[i].text, ground_truths[i])    # the response alone, not the prompt
        categories[i] = "format_wrong"  when rewards[i]["format_reward"] == 0 (whatever the answer reward)
                        "answer_wrong"  when the format reward is not 0 and rewards[i]["answer_reward"] == 0
                        "correct"       otherwise

    Args:
        engine: a rollout engine (`course_lib.rollouts`): `engine.generate(prompts, params)` returns
            one `Rollout` per prompt (its `.text` is the response) when `params.n == 1`.
        prompts: N prompt strings (e.g. r1_zero prompts, ending in "<think>").
        ground_truths: N gold answers, in the order of `prompts`.
        sampling_params: a `SamplingParams` with n == 1, passed to the engine unchanged (its stop
            string, token budget, temperature and seed are the caller's choice).
        reward_fn: reward_fn(response, ground_truth) -> {"format_reward", "answer_reward", "reward"}.

    Returns:
        {"rollouts": the N rollouts as the engine returned them,
         "rewards": N dicts, each what reward_fn returned for that example,
         "categories": N strings from CATEGORIES,
         "counts": {"format_wrong": int, "answer_wrong": int, "correct": int}, every key present,
         "format_reward", "answer_reward", "reward": the means over the N examples (Python floats)}

    Raises:
        ValueError: a different number of prompts and ground truths.
        ValueError: no prompts.
        ValueError: sampling_params.n != 1.
    """
    if len(prompts) != len(ground_truths):
        raise ValueError(f"got {len(prompts)} prompts but {len(ground_truths)} ground truths")
    if not prompts:
        raise ValueError("nothing to evaluate: no prompts")
    if sampling_params.n != 1:
        raise ValueError(f"evaluate grades one response per prompt; got sampling_params.n = {sampling_params.n}")
    rollouts = engine.generate(list(prompts), sampling_params)
    rewards = [dict(reward_fn(r.text, str(gt))) for r, gt in zip(rollouts, ground_truths)]
    categories = ["format_wrong" if s["format_reward"] == 0 else "answer_wrong" if s["answer_reward"] == 0
                  else "correct" for s in rewards]
    n = len(rewards)
    return {
        "rollouts": rollouts,
        "rewards": rewards,
        "categories": categories,
        "counts": {c: categories.count(c) for c in CATEGORIES},
        "format_reward": sum(float(s["format_reward"]) for s in rewards) / n,
        "answer_reward": sum(float(s["answer_reward"]) for s in rewards) / n,
        "reward": sum(float(s["reward"]) for s in rewards) / n,
    }
