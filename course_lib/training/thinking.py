"""Thinking modes in training (notebook 13): chat data in two modes, mode-aware rewards, evaluation per mode.

The graded pieces are in `course_lib.thinking` (rendering, empty-block removal, the thinking
flag, the reasoning split, the loss mask, the format reward); this module wires them into the
course's SFT and GRPO trainers, which take records of a prompt and an output:

- `chat_target` writes a problem's reply in either mode: thinking, the worked steps inside
  `<think>` (the intermediate results the tiny model needs); direct, the empty block and the answer;
- `sft_records` turns conversations into SFT records after `remove_empty_think`: the prompt is the
  conversation rendered up to the generation prompt of the reply's mode, the output the rest of the
  reply and `<|im_end|>`, so the trainer's tokenization gives `assistant_loss_mask`'s ids and mask;
- `rl_questions` draws each RL prompt's mode with `thinking_flags`;
- `chat_reward_fn` grades a completion in either mode (the fix of the prefilled-`<think>` bug:
  `thinking_format_reward` knows whether `<think>` was in the prompt);
- `evaluate_modes` measures, per mode asked, how often the model follows it, its accuracy and its
  tokens per answer;
- `RecordingEngine` keeps each step's rollouts so that a run's reward and length can be read per
  mode (the trainer logs batch means only).

Each function takes the graded functions it calls as `fns` (a `Graded`: the references by default),
so that a notebook runs them with the student's own.

Simplification, named: an RL prompt's mode is drawn once, when the questions are built, not at
every step.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

import torch

from ..gsm8k import DataFormatError, extract_gsm8k_answer, read_jsonl
from ..paths import DATA_DIR
from ..rewards import grade_answer
from ..rollouts.interface import SamplingParams
from ..thinking import (EMPTY_THINK, IM_END, remove_empty_think, render_conversation, split_reasoning,
                        thinking_flags, thinking_format_reward)

@dataclass(frozen=True)
class Graded:
    """The graded functions of notebook 13 this module calls: the references by default, a student's
    own when a notebook passes them (in a student kit the references are stubs)."""

    render: Callable = render_conversation
    remove: Callable = remove_empty_think
    flags: Callable = thinking_flags
    split: Callable = split_reasoning
    format_reward: Callable = thinking_format_reward


REFERENCE = Graded()
ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
STOP = ("</answer>",)  # a reply ends with its answer block; `<|im_end|>` follows in the SFT targets


def chat_target(problem: dict, thinking: bool) -> str:
    """The assistant's reply to `problem` ({"question", "answer"} in GSM8K form) in one mode.

    thinking: `<think>\\n{the answer's worked lines}\\n</think>\\n\\n<answer> N </answer>`;
    direct: `<think>\\n\\n</think>\\n\\n<answer> N </answer>` (the empty block a chat template inserts)."""
    steps = "\n".join(line for line in problem["answer"].split("\n") if not line.startswith("####"))
    answer = f"<answer> {extract_gsm8k_answer(problem['answer'])} </answer>"
    return f"<think>\n{steps}\n</think>\n\n{answer}" if thinking else EMPTY_THINK + answer


def conversations(problems: list[dict], thinking_share: float, seed: int, fns: Graded = REFERENCE) -> list[dict]:
    """One single-turn conversation per problem, its mode drawn with `thinking_flags` (seeded):
    {"messages": [user, assistant], "ground_truth": N, "thinking": bool}."""
    flags = fns.flags(len(problems), thinking_share, torch.Generator().manual_seed(seed))
    return [{"messages": [{"role": "user", "content": p["question"]},
                          {"role": "assistant", "content": chat_target(p, thinking=f)}],
             "ground_truth": extract_gsm8k_answer(p["answer"]), "thinking": f}
            for p, f in zip(problems, flags)]


CONVERSATIONS = DATA_DIR / "think" / "train.jsonl"  # `scripts/make_world.py think`


def _conversation_problem(record: dict) -> str | None:
    messages = record.get("messages")
    if not isinstance(messages, list) or not messages or not all(
            isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)
            for m in messages):
        return "'messages' must be a non-empty list of {'role', 'content'} strings"
    if not isinstance(record.get("thinking"), bool):
        return "'thinking' must be true or false"
    return None


def load_conversations(path=CONVERSATIONS) -> list[dict]:
    """The conversations of a jsonl file (default: notebook 13's SFT mixture), each checked: a
    list of {"role", "content"} string dicts in `messages`, a string `ground_truth`, a bool
    `thinking`; anything else is a `DataFormatError` naming the file and line."""
    return read_jsonl(path, required_fields=("ground_truth",), check=_conversation_problem)


def sft_records(convs: list[dict], keep_prob: float, seed: int, template: str = "qwen3",
                fns: Graded = REFERENCE) -> list[dict]:
    """SFT records {"prompt", "output", "ground_truth", "thinking"} of conversations whose empty
    think blocks are kept with probability `keep_prob` (`remove_empty_think`, seeded).

    A reply that starts with the empty block is rendered in direct mode, so the block is the
    prompt's (out of the loss, as at inference); any other reply in thinking mode, its generated
    `<think>` in the loss. A direct reply whose block was removed is thus trained right after the
    thinking-mode prompt: what a keep rate below 1 teaches."""
    replies = fns.remove([c["messages"][-1]["content"] for c in convs], keep_prob=keep_prob,
                                 generator=torch.Generator().manual_seed(seed))
    records = []
    for conv, reply in zip(convs, replies):
        thinking = not reply.startswith(EMPTY_THINK)
        prompt = fns.render(conv["messages"][:-1], template=template, thinking=thinking)
        prefill = prompt.split("<|im_start|>assistant\n")[-1]
        if not reply.startswith(prefill):
            raise ValueError(f"a reply does not start with the {template!r} prompt's prefill {prefill!r}")
        records.append({"prompt": prompt, "output": reply[len(prefill):] + IM_END,
                        "ground_truth": conv["ground_truth"], "thinking": thinking})
    return records


def rl_questions(problems: list[dict], thinking_ratio: float, seed: int, template: str = "qwen3",
                 fns: Graded = REFERENCE) -> list[dict]:
    """GRPO questions {"prompt", "ground_truth", "thinking"}: each prompt in thinking mode with
    probability `thinking_ratio` (`thinking_flags`, seeded), else in direct mode."""
    flags = fns.flags(len(problems), thinking_ratio, torch.Generator().manual_seed(seed))
    return [{"prompt": fns.render([{"role": "user", "content": p["question"]}], template=template, thinking=f),
             "ground_truth": extract_gsm8k_answer(p["answer"]), "thinking": f}
            for p, f in zip(problems, flags)]


SWITCHES = ("open_thinking", "enable_thinking")  # the course template's, the Qwen3 style's


def thinking_switch(chat_template: str | None) -> str:
    """The name of the thinking switch a Jinja chat template reads. Jinja ignores an argument a
    template never reads, so asking a template without a switch for a mode would silently render
    the same prompt in both modes: a ValueError instead."""
    found = [s for s in SWITCHES if chat_template and re.search(rf"\b{s}\b", chat_template)]
    if len(found) != 1:
        raise ValueError(f"the chat template reads {'no' if not found else 'more than one'} thinking switch "
                         f"({' or '.join(SWITCHES)}): a mode passed to it would be ignored")
    return found[0]


def apply_template(tokenizer, messages: list[dict], thinking: bool | None = None,
                   add_generation_prompt: bool = True) -> str:
    """`tokenizer.apply_chat_template` (the real Jinja) of `messages` as text, its thinking switch set to
    `thinking` (None: not passed); a ValueError when the template has no switch and a mode is asked."""
    kwargs = {} if thinking is None else {thinking_switch(tokenizer.chat_template): thinking}
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=add_generation_prompt,
                                         **kwargs)


def prefilled_by(prompt: str) -> bool:
    """Whether the prompt ends inside an open think block (the course template's thinking mode)."""
    return prompt.endswith("<think>\n")


def answer_of(answer_part: str) -> str | None:
    """The text inside the last `<answer> ... </answer>` of a reply's answer part, or None."""
    found = ANSWER.findall(answer_part)
    return found[-1] if found else None


def chat_reward(completion: str, ground_truth: str, prefilled: bool, fns: Graded = REFERENCE) -> dict[str, float]:
    """{"format_reward", "answer_reward", "reward"} of a chat completion in either mode.

    A completion that thinks (a closed block, then an answer: `thinking_format_reward`) or answers
    directly (no block at all) is well formed when its answer part holds an `<answer>` block;
    reward = answer reward, as in r1_zero."""
    reasoning, answer_part = fns.split(completion, prefilled)
    formed = fns.format_reward(completion, prefilled) == 1.0 or (reasoning is None and not prefilled)
    answer = answer_of(answer_part) if formed else None
    correct = answer is not None and grade_answer(answer, str(ground_truth))
    return {"format_reward": float(answer is not None), "answer_reward": float(correct), "reward": float(correct)}


def chat_reward_fn(response: str, ground_truth: str, fns: Graded = REFERENCE) -> dict[str, float]:
    """`chat_reward` for prompts that never prefill `<think>` (the Qwen3-style template, either mode):
    the trainer's `reward_fn(response, ground_truth)`."""
    return chat_reward(response, ground_truth, prefilled=False, fns=fns)


def starts_with_think_reward_fn(response: str, ground_truth: str, fns: Graded = REFERENCE) -> dict[str, float]:
    """THE BUG (kept to be run): a format check that wants the completion itself to open `<think>`.
    Under a prompt that prefills `<think>` no completion does, so every reward is 0."""
    if not response.lstrip().startswith("<think>"):
        return {"format_reward": 0.0, "answer_reward": 0.0, "reward": 0.0}
    return chat_reward(response, ground_truth, prefilled=False, fns=fns)


def prefilled_reward_fn(response: str, ground_truth: str, fns: Graded = REFERENCE) -> dict[str, float]:
    """The fix for prompts that prefill `<think>` (the course template's thinking mode)."""
    return chat_reward(response, ground_truth, prefilled=True, fns=fns)


def followed(completion: str, thinking: bool, prefilled: bool, fns: Graded = REFERENCE) -> bool:
    """Whether a completion is in the mode that was asked: a non-empty closed think block, then an
    answer block (thinking); its answer block and nothing before it (direct)."""
    reasoning, answer_part = fns.split(completion, prefilled)
    if thinking:
        return bool(reasoning) and fns.format_reward(completion, prefilled) == 1.0 \
            and answer_of(answer_part) is not None
    return reasoning is None and completion.lstrip().startswith("<answer>") and answer_of(completion) is not None


def evaluate_modes(engine, tokenizer, problems: list[dict], template: str = "qwen3", max_tokens: int = 160,
                   modes: tuple[bool, ...] = (True, False), fns: Graded = REFERENCE) -> dict:
    """Greedy replies to each problem in each mode asked: {"thinking" | "direct": {"followed",
    "accuracy", "tokens", "n", "examples", "texts"}}, accuracy graded by `chat_reward` whatever the
    mode the reply took, tokens = generated tokens per reply (mean), texts = the replies, examples =
    the first three."""
    params = SamplingParams(temperature=0.0, max_tokens=max_tokens, stop=STOP, n=1, seed=0)
    out = {}
    for thinking in modes:
        rows = rl_questions(problems, thinking_ratio=1.0 if thinking else 0.0, seed=0, template=template, fns=fns)
        rollouts = engine.generate([r["prompt"] for r in rows], params)
        prefilled = [prefilled_by(r["prompt"]) for r in rows]
        texts = [r.text for r in rollouts]
        scores = [chat_reward(t, r["ground_truth"], p, fns=fns) for t, r, p in zip(texts, rows, prefilled)]
        n = len(rows)
        out["thinking" if thinking else "direct"] = {
            "followed": sum(followed(t, thinking, p, fns=fns) for t, p in zip(texts, prefilled)) / n,
            "accuracy": sum(s["answer_reward"] for s in scores) / n,
            "tokens": sum(len(r.token_ids) for r in rollouts) / n, "n": n, "examples": texts[:3], "texts": texts}
    return out


class RecordingEngine:
    """A rollout engine that keeps the prompts and rollouts of its last `generate` call (and of
    every call in `calls` when `keep_all`), so that a step's rewards can be split by the prompt's mode."""

    def __init__(self, engine, keep_all: bool = True):
        self.engine, self.keep_all, self.calls = engine, keep_all, []

    def generate(self, prompts, params):
        rollouts = self.engine.generate(prompts, params)
        self.calls = (self.calls if self.keep_all else []) + [rollouts]
        return rollouts

    def load_weights(self, model) -> None:
        self.engine.load_weights(model)


def by_mode(rollouts, reward_fn) -> dict:
    """Mean reward and response tokens of one step's rollouts, split by the mode of their prompt
    (direct: the prompt ends with the empty block): {"thinking" | "direct": {"reward", "tokens", "n"}}."""
    out = {}
    for mode in ("thinking", "direct"):
        rows = [r for r in rollouts if r.prompt.endswith(EMPTY_THINK) == (mode == "direct")]
        if rows:
            # the ground truth is not in a rollout: the reward_fn here closes over it per prompt
            rewards = [reward_fn(r) for r in rows]
            out[mode] = {"reward": sum(rewards) / len(rows), "tokens": sum(len(r.token_ids) for r in rows) / len(rows),
                         "n": len(rows)}
    return out
