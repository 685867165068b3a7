"""What the hidden cases of notebook 13 (thinking modes) are made of: arithmetic questions with
their worked reasoning and answer, drawn at random. Grader side only: their grader.py imports it;
their harness needs nothing of it."""

from __future__ import annotations

import torch

EMPTY = "<think>\n\n</think>\n\n"


def draw_problems(gen: torch.Generator, n: int) -> list[dict]:
    """n distinct arithmetic problems: {"question", "reasoning" (the worked lines), "answer" (the number)}."""
    from course_lib import load_problems

    problems = load_problems("arith", "train")
    out = []
    for i in torch.randperm(len(problems), generator=gen)[:n].tolist():
        reasoning, _, answer = problems[i]["answer"].rpartition("####")
        out.append({"question": problems[i]["question"], "reasoning": reasoning.strip(), "answer": answer.strip()})
    return out


def draw_int(gen: torch.Generator, low: int, high: int) -> int:
    return int(torch.randint(low, high, (), generator=gen))



def draw_completion_parts(gen: torch.Generator, n: int = 6) -> tuple[list[str], list[str], int]:
    """(reasonings, answers "So the answer is N, as computed.", a number k) of n drawn problems: what the completions
    of the split_reasoning and thinking_format_reward cases are made of."""
    probs = draw_problems(gen, n)
    return ([p["reasoning"] for p in probs], [f"So the answer is {p['answer']}, as computed." for p in probs], draw_int(gen, 10, 99))


def completions_case(*completions: tuple[str, bool]) -> dict:
    """A case's inputs from (completion, prefilled) pairs."""
    return {"completions": [c for c, _ in completions], "prefilled": [p for _, p in completions]}
