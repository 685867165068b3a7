"""Thinking modes (notebook 13): one model that thinks before it answers, or answers directly.

The mode is chosen by the chat template's generation prompt, the text the prompt ends with:

- the course template (`data/tokenizer/chat_template.jinja`), switch `open_thinking`: by default
  (or True) the prompt ends with `<|im_start|>assistant\\n<think>\\n`, so `<think>` is *prefilled*
  and the completion starts inside the block; False ends it with an empty block
  `<|im_start|>assistant\\n<think>\\n\\n</think>\\n\\n` and the completion is the answer;
- a Qwen3-style template (`QWEN3_STYLE_TEMPLATE`), switch `enable_thinking`, the opposite default:
  by default (or True) the prompt ends with `<|im_start|>assistant\\n` and the model *generates*
  its own `<think>`; False ends it with the same empty block. It also drops the reasoning of the
  assistant turns before the last user message.

Each message is `<|im_start|>{role}\\n{content}<|im_end|>\\n`. The functions here write the
templates in plain Python (the tests hold them equal to `apply_chat_template` of the real
Jinja), remove empty blocks from SFT targets, draw the mode of each RL prompt, split a completion
into reasoning and answer in either mode, mask the loss to the assistant's own tokens, and reward
the format in either mode.
"""

from __future__ import annotations

import torch

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
EMPTY_THINK = "<think>\n\n</think>\n\n"  # the block of a direct answer
IM_START, IM_END = "<|im_start|>", "<|im_end|>"


def render_conversation(messages: list[dict], template: str = "course", thinking: bool | None = None,
                        add_generation_prompt: bool = True) -> str:
    """The text `tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=...)`
    gives with the template `template`, its switch set to `thinking` (None: not passed).

    messages: {"role", "content"} dicts: an optional leading "system" message, then "user",
    "assistant", "user", ... alternating, starting with "user" (at least one). Each message is
    rendered `<|im_start|>{role}\\n{content}<|im_end|>\\n`, except, with template "qwen3", an
    assistant message before the last user message whose content holds `</think>`: its content is
    the text after its last `</think>`, leading newlines removed (`.lstrip("\\n")`). Then, when
    add_generation_prompt, `<|im_start|>assistant\\n`, followed by
      - "course" (switch `open_thinking`): `<think>\\n` unless thinking is False, then `<think>\\n\\n</think>\\n\\n`;
      - "qwen3" (switch `enable_thinking`): nothing unless thinking is False, then `<think>\\n\\n</think>\\n\\n`.

    Raises:
        ValueError: an unknown template (the names are case-sensitive: "Qwen3" is unknown).
        ValueError: a message without a `role` or a `content` key.
        ValueError: roles out of that order: no user message (an empty conversation, a system
            message alone), a first turn that is not the user's, a role twice in a row, a system
            message after the first, a role of another kind ("tool").
    """
    if template not in ("course", "qwen3"):
        raise ValueError(f"template must be 'course' or 'qwen3', got {template!r}")
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or "role" not in message or "content" not in message:
            raise ValueError(f"messages[{i}] must be a dict with a 'role' and a 'content'")
    roles = [m["role"] for m in messages]
    turns = roles[1:] if roles[:1] == ["system"] else roles
    if not turns or turns != [("user", "assistant")[i % 2] for i in range(len(turns))]:
        raise ValueError(f"messages: the roles must be an optional system message, then user, assistant, "
                         f"user, ... starting with user; got {roles}")
    last_user = max(i for i, role in enumerate(roles) if role == "user")
    text = ""
    for i, message in enumerate(messages):
        content = message["content"]
        if template == "qwen3" and message["role"] == "assistant" and i < last_user and THINK_CLOSE in content:
            content = content.split(THINK_CLOSE)[-1].lstrip("\n")
        text += f"{IM_START}{message['role']}\n{content}{IM_END}\n"
    if add_generation_prompt:
        text += f"{IM_START}assistant\n"
        if thinking is False:
            text += EMPTY_THINK
        elif template == "course":
            text += f"{THINK_OPEN}\n"
    return text


def remove_empty_think(targets: list[str], keep_prob: float, generator: torch.Generator) -> list[str]:
    """SFT targets in which each empty think block at the start is kept with probability keep_prob.

    u = torch.rand(len(targets), generator=generator): one draw per target, for every target (in
    order, whatever it holds). A target that starts with `<think>\\n\\n</think>\\n\\n` keeps it iff
    u[i] < keep_prob; otherwise the block (19 characters) is removed and the rest is left as it is. Any
    other target (a non-empty block, no block, an empty block elsewhere) is returned unchanged.
    Only that one block is removed (a second empty block after it stays), nothing is stripped.

    Raises:
        ValueError: keep_prob outside [0, 1].
    """
    if not 0.0 <= keep_prob <= 1.0:
        raise ValueError(f"keep_prob must be in [0, 1], got {keep_prob}")
    u = torch.rand(len(targets), generator=generator).tolist()
    out = []
    for target, draw in zip(targets, u):
        if target.startswith(EMPTY_THINK) and not draw < keep_prob:
            target = target[len(EMPTY_THINK):]
        out.append(target)
    return out


def thinking_flags(n: int, thinking_ratio: float, generator: torch.Generator) -> list[bool]:
    """Which of n RL prompts are rolled out in thinking mode: flag i is True iff u[i] < thinking_ratio,
    u = torch.rand(n, generator=generator). So thinking_ratio 1 thinks always, 0 never. Returns a
    list of n Python bools (n = 0 gives []), having drawn exactly n numbers.

    Raises:
        ValueError: thinking_ratio outside [0, 1] (a percentage such as 50 too).
        ValueError: n < 0.
    """
    if not 0.0 <= thinking_ratio <= 1.0:
        raise ValueError(f"thinking_ratio must be in [0, 1], got {thinking_ratio}")
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    return (torch.rand(n, generator=generator) < thinking_ratio).tolist()


def split_reasoning(completion: str, prefilled: bool) -> tuple[str | None, str]:
    """(reasoning, answer) of a completion in thinking mode.

    prefilled True: the prompt ended with `<think>`, so the block is open at the completion's
    start. prefilled False: the block opens at a `<think>` that starts the completion (whitespace
    before it allowed); a completion that does not start so is a direct answer: (None,
    completion.strip()). The block closes at the `</think>` that matches its opening: each
    `<think>` inside opens a nested block, each `</think>` closes the innermost open one.
    reasoning = the text inside the block, stripped; answer = the text after its closing tag,
    stripped. A block that never closes (the model still thinking): (the text after the opening, stripped, "").
    """
    text = completion
    if not prefilled:
        text = completion.lstrip()
        if not text.startswith(THINK_OPEN):
            return None, completion.strip()
        text = text[len(THINK_OPEN):]
    depth, pos = 1, 0
    while True:
        close = text.find(THINK_CLOSE, pos)
        if close < 0:
            return text.strip(), ""
        opened = text.find(THINK_OPEN, pos)
        if 0 <= opened < close:
            depth, pos = depth + 1, opened + len(THINK_OPEN)
            continue
        depth, pos = depth - 1, close + len(THINK_CLOSE)
        if depth == 0:
            return text[:close].strip(), text[pos:].strip()


def assistant_loss_mask(tokenizer, messages: list[dict], template: str = "course",
                        thinking: bool | None = None) -> dict:
    """Token ids of a conversation and the loss mask of its last message, the assistant's reply.

    messages: as `render_conversation` takes them, the last one the assistant's reply whose
    content is the text after `<|im_start|>assistant\\n` (its think block included, as the model
    writes it). prompt = render_conversation(messages[:-1], template, thinking,
    add_generation_prompt=True); prefill = the text the prompt's generation prompt puts after
    `<|im_start|>assistant\\n` (`<think>\\n`, the empty block or nothing); completion = the reply
    without that prefill, then `<|im_end|>`. Prompt and completion are tokenized separately
    (`add_special_tokens=False`) and concatenated, as `tokenize_prompt_and_output` does.

    Returns {"input_ids": (T,) long, "loss_mask": (T,) bool}, the mask 1 exactly on the completion's
    tokens: a prefilled `<think>` is the prompt's, a generated one the reply's.

    Raises:
        ValueError: messages render_conversation refuses (an unknown template, roles out of order,
            two assistant replies in a row).
        ValueError: a last message that is not the assistant's.
        ValueError: a reply that does not start with the prefill (no `<think>` after the course
            template's default prompt, reasoning after the empty block of thinking=False).
    """
    render_conversation(messages, template=template, add_generation_prompt=False)  # checks the roles
    if messages[-1]["role"] != "assistant":
        raise ValueError("messages: the last message must be the assistant's reply")
    prompt = render_conversation(messages[:-1], template=template, thinking=thinking, add_generation_prompt=True)
    prefill = prompt.split(f"{IM_START}assistant\n")[-1]
    reply = messages[-1]["content"]
    if not reply.startswith(prefill):
        raise ValueError(f"messages: the reply must start with the generation prompt's {prefill!r} "
                         f"(template {template!r}, thinking={thinking})")
    prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    completion_ids = tokenizer(reply[len(prefill):] + IM_END, add_special_tokens=False)["input_ids"]
    input_ids = torch.tensor(prompt_ids + completion_ids, dtype=torch.long)
    loss_mask = torch.zeros(len(input_ids), dtype=torch.bool)
    loss_mask[len(prompt_ids):] = True
    return {"input_ids": input_ids, "loss_mask": loss_mask}


def thinking_format_reward(completion: str, prefilled: bool) -> float:
    """1.0 when the completion, read as `split_reasoning(completion, prefilled)` reads it, holds a
    closed think block (its matching `</think>` is there; an empty block is closed too) followed by
    a non-empty answer (after stripping); else 0.0. Right whether
    the prompt prefilled `<think>` (the completion then starts inside the block) or the model
    generated it (the completion then starts with it)."""
    reasoning, answer = split_reasoning(completion, prefilled)
    return 1.0 if reasoning is not None and answer else 0.0
