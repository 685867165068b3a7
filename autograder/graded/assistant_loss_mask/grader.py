"""The grader's side of `assistant_loss_mask` (notebook 13): how its hidden cases are drawn, the
correct versions that must earn full marks and the known mistakes that must lose them, each with the
sentence a student reads (`autograder.mistakes`). Never in a student kit or the grading sandbox,
which hold the folder's __init__.py only.

Hidden cases of `assistant_loss_mask(tokenizer, messages, template="course", thinking=None) -> dict`
(notebook 13): prompt = render_conversation(messages[:-1], template, thinking,
add_generation_prompt=True); completion = the last message's content (the assistant's reply)
without what the generation prompt prefilled (`<think>\n`, the empty block or nothing), then
`<|im_end|>`; prompt and completion tokenized separately with the course tokenizer
(add_special_tokens=False) and concatenated: {"input_ids": (T,) long, "loss_mask": (T,) bool},
the mask 1 exactly on the completion's tokens. Each case passes only the arguments it names.

Conversations: arithmetic questions, replies with a reasoning block, an empty block or none, an
optional system message, earlier turns. Outputs are exact (ids, mask, dtypes). Error cases must
raise ValueError (or a subclass): {"raises": "ValueError"}, "other" (another exception) or None.
The tripwire forbids calling course_lib's render_conversation: the mask is graded on a student's
own rendering.

What the cases are built to catch: a prefilled `<think>` (or empty block) counted in the mask
(`course_*`, `qwen3_thinking_false_*`); the Qwen3-style default taken as the course's (its
generated `<think>` left out of the mask, a direct reply refused); the mode flags inverted; the
reasoning of earlier turns kept in the Qwen3-style prompt (`qwen3_*multi_turn*`); `<|im_end|>`
left out, left out of the mask, or followed by its newline; the mask shifted by one as for labels;
a mask of integers; and the errors: a reply that does not start with the prefill, a last message
that is not the assistant's, two replies in a row (the prompt's messages alone are in order), roles
out of order, an unknown template.

The suite's tripwire forbids calling course_lib's render_conversation: each version carries its
own rendering of the two templates.
"""

from __future__ import annotations

import torch

from autograder.graded._thinking_texts import draw_int, draw_problems
from autograder.mistakes import edited, Mistake


# ---------------------------------------------------------------- the hidden cases
# each error case and the phrase of the reference's `Raises:` section that states it (tests/test_contracts.py)
RAISES = {
    "error_course_reply_without_the_prefilled_think": "no `<think>` after the course template's default prompt",
    "error_course_closed_reply_with_reasoning": "reasoning after the empty block of thinking=False",
    "error_qwen3_closed_reply_with_reasoning": "reasoning after the empty block of thinking=False",
    "error_last_message_is_the_users": "a last message that is not the assistant's",
    "error_two_assistant_replies_in_a_row": "two assistant replies in a row",
    "error_roles_out_of_order": "roles out of order",
    "error_unknown_template": "an unknown template",
}
EMPTY = "<think>\n\n</think>\n\n"


def make_inputs(gen: torch.Generator) -> list[tuple[str, dict]]:

    probs = draw_problems(gen, 10)
    k = draw_int(gen, 10, 99)
    q = [p["question"] for p in probs]
    thought = [f"<think>\n{p['reasoning']}\n</think>\n\nThe answer is {p['answer']}." for p in probs]
    direct = [f"{EMPTY}The answer is {p['answer']}." for p in probs]
    bare = [f"It is {p['answer']}." for p in probs]
    system = {"role": "system", "content": f"Answer in one line when you can ({k})."}

    def conv(*contents, sys=False):
        roles = ("user", "assistant")
        return ([system] if sys else []) + [{"role": roles[i % 2], "content": c} for i, c in enumerate(contents)]

    def case(messages, expect_error=False, **kwargs):
        return {"messages": messages, "kwargs": kwargs, "expect_error": expect_error}

    return [
        ("course_default_single_turn", case(conv(q[0], thought[0]))),
        ("course_thinking_true_with_system", case(conv(q[1], thought[1], sys=True), template="course", thinking=True)),
        ("course_thinking_false_single_turn", case(conv(q[2], direct[2]), thinking=False)),
        ("course_multi_turn_default", case(conv(q[3], thought[3], q[4], direct[4], q[5], thought[5]))),
        ("qwen3_default_generated_think", case(conv(q[6], thought[6]), template="qwen3")),
        ("qwen3_default_direct_reply", case(conv(q[7], bare[7]), template="qwen3")),
        ("qwen3_default_reply_with_an_empty_block", case(conv(q[8], direct[8], sys=True), template="qwen3")),
        ("qwen3_thinking_true_multi_turn", case(conv(q[9], thought[9], q[0], thought[0], q[1], thought[1]),
                                                template="qwen3", thinking=True)),
        ("qwen3_thinking_false_single_turn", case(conv(q[2], direct[2]), template="qwen3", thinking=False)),
        ("qwen3_thinking_false_multi_turn_with_system", case(conv(q[3], thought[3], q[4], direct[4], sys=True),
                                                             template="qwen3", thinking=False)),
        ("error_course_reply_without_the_prefilled_think", case(conv(q[5], bare[5]), expect_error=True)),
        ("error_course_closed_reply_with_reasoning", case(conv(q[6], thought[6]), expect_error=True, thinking=False)),
        ("error_qwen3_closed_reply_with_reasoning", case(conv(q[7], thought[7]), expect_error=True, template="qwen3",
                                                         thinking=False)),
        ("error_last_message_is_the_users", case(conv(q[8], bare[8], q[9]), expect_error=True, template="qwen3")),
        ("error_two_assistant_replies_in_a_row", case(conv(q[3], bare[3]) + [{"role": "assistant", "content": bare[4]}],
                                                      expect_error=True, template="qwen3")),
        ("error_roles_out_of_order", case([{"role": "user", "content": q[0]}] + conv(q[1], thought[1]), expect_error=True)),
        ("error_unknown_template", case(conv(q[2], thought[2]), expect_error=True, template="chatml")),
    ]


# ---------------------------------------------------------------- the correct versions
BASE = """
    import torch
    def _render(messages, template, thinking, generation_prompt):
        if template not in ("course", "qwen3"):
            raise ValueError(f"unknown template {template!r}")
        for m in messages:
            if "role" not in m or "content" not in m:
                raise ValueError("messages: a message needs a role and a content")
        roles = [m["role"] for m in messages]
        body = roles[1:] if roles[:1] == ["system"] else roles
        if not body or body != [["user", "assistant"][i % 2] for i in range(len(body))]:
            raise ValueError(f"messages: roles out of order: {roles}")
        last_user = max(i for i, r in enumerate(roles) if r == "user")
        text = ""
        for i, m in enumerate(messages):
            c = m["content"]
            if template == "qwen3" and m["role"] == "assistant" and i < last_user and "</think>" in c:
                c = c.split("</think>")[-1].lstrip("\\n")
            text += f"<|im_start|>{m['role']}\\n{c}<|im_end|>\\n"
        if generation_prompt:
            text += "<|im_start|>assistant\\n"
            if thinking is False:
                text += "<think>\\n\\n</think>\\n\\n"
            elif template == "course":
                text += "<think>\\n"
        return text

    def assistant_loss_mask(tokenizer, messages, template="course", thinking=None):
        _render(messages, template, thinking, False)
        if messages[-1]["role"] != "assistant":
            raise ValueError("messages: the last message must be the assistant's reply")
        prompt = _render(messages[:-1], template, thinking, True)
        if thinking is False:
            prefill = "<think>\\n\\n</think>\\n\\n"
        else:
            prefill = "<think>\\n" if template == "course" else ""
        reply = messages[-1]["content"]
        if not reply.startswith(prefill):
            raise ValueError("messages: the reply does not start with the prefill")
        p = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        c = tokenizer(reply[len(prefill):] + "<|im_end|>", add_special_tokens=False)["input_ids"]
        return {"input_ids": torch.tensor(p + c, dtype=torch.long),
                "loss_mask": torch.tensor([False] * len(p) + [True] * len(c))}
"""

PROMPT = "prompt = _render(messages[:-1], template, thinking, True)"

COMPLETION = 'c = tokenizer(reply[len(prefill):] + "<|im_end|>", add_special_tokens=False)["input_ids"]'

RETURN = """        return {"input_ids": torch.tensor(p + c, dtype=torch.long),
                "loss_mask": torch.tensor([False] * len(p) + [True] * len(c))}"""

PREFILL_LINES = """        if thinking is False:
            prefill = "<think>\\n\\n</think>\\n\\n"
        else:
            prefill = "<think>\\n" if template == "course" else ""
"""

COURSE_PROMPTS = ["course_default_single_turn", "course_thinking_false_single_turn", "course_multi_turn_default"]


CORRECT = {
    "render_then_remove_the_prefill": BASE,
    # a table of prefills, the prompt built from the conversation without its generation prompt, torch.cat
    "prefill_table_and_cat": """
        import torch
        PREFILLS = {("course", None): "<think>\\n", ("course", True): "<think>\\n",
                    ("course", False): "<think>\\n\\n</think>\\n\\n", ("qwen3", None): "", ("qwen3", True): "",
                    ("qwen3", False): "<think>\\n\\n</think>\\n\\n"}
        def turns(messages, template):
            if template not in ("course", "qwen3"):
                raise ValueError("template")
            if any("role" not in m or "content" not in m for m in messages):
                raise ValueError("messages")
            roles = [m["role"] for m in messages]
            start = 1 if roles and roles[0] == "system" else 0
            if len(roles) == start or any(r != ("user", "assistant")[k % 2] for k, r in enumerate(roles[start:])):
                raise ValueError("messages: roles")
            last_user = len(roles) - 1 - roles[::-1].index("user")
            parts = []
            for k, m in enumerate(messages):
                content = m["content"]
                if template == "qwen3" and m["role"] == "assistant" and k < last_user:
                    head, sep, tail = content.rpartition("</think>")
                    content = tail.lstrip("\\n") if sep else content
                parts.append("<|im_start|>" + m["role"] + "\\n" + content + "<|im_end|>\\n")
            return "".join(parts)
        def assistant_loss_mask(tokenizer, messages, template="course", thinking=None):
            turns(messages, template)
            if messages[-1]["role"] != "assistant":
                raise ValueError("messages: no reply at the end")
            prefill = PREFILLS[(template, thinking)]
            prompt = turns(messages[:-1], template) + "<|im_start|>assistant\\n" + prefill
            reply = messages[-1]["content"]
            if reply[:len(prefill)] != prefill:
                raise ValueError("messages: the reply must begin with the generation prompt's prefill")
            prompt_ids = torch.tensor(tokenizer(prompt, add_special_tokens=False).input_ids, dtype=torch.long)
            reply_ids = torch.tensor(tokenizer(reply[len(prefill):] + "<|im_end|>", add_special_tokens=False).input_ids,
                                     dtype=torch.long)
            return {"input_ids": torch.cat([prompt_ids, reply_ids]),
                    "loss_mask": torch.cat([torch.zeros(len(prompt_ids), dtype=torch.bool),
                                            torch.ones(len(reply_ids), dtype=torch.bool)])}
    """,
    # the whole conversation rendered, the prompt cut off its front
    "whole_conversation_minus_the_prompt": """
        import torch
        def render(messages, template="course", thinking=None, add_generation_prompt=True):
            if template not in ["course", "qwen3"]:
                raise ValueError(f"template {template}")
            for idx, m in enumerate(messages):
                if not isinstance(m, dict) or "role" not in m or "content" not in m:
                    raise ValueError(f"messages[{idx}]")
            i = 1 if messages and messages[0]["role"] == "system" else 0
            if i == len(messages):
                raise ValueError("messages: no user")
            for j in range(i, len(messages)):
                if messages[j]["role"] != ("user" if (j - i) % 2 == 0 else "assistant"):
                    raise ValueError("messages: roles must alternate")
            last_user = [m["role"] for m in messages].__len__() - 1
            while messages[last_user]["role"] != "user":
                last_user -= 1
            out = ""
            for j, m in enumerate(messages):
                c = m["content"]
                at = c.rfind("</think>")
                if template == "qwen3" and m["role"] == "assistant" and j < last_user and at != -1:
                    c = c[at + 8:].lstrip("\\n")
                out += "<|im_start|>" + m["role"] + "\\n" + c + "<|im_end|>\\n"
            if add_generation_prompt:
                out += "<|im_start|>assistant\\n"
                if thinking is False:
                    out += "<think>\\n\\n</think>\\n\\n"
                elif template == "course":
                    out += "<think>\\n"
            return out
        def assistant_loss_mask(tokenizer, messages, template="course", thinking=None):
            whole = render(messages, template, thinking, add_generation_prompt=False)
            if messages[-1]["role"] != "assistant":
                raise ValueError("messages: the last turn is not the assistant's")
            prompt = render(messages[:-1], template, thinking, add_generation_prompt=True)
            if not whole.startswith(prompt):
                raise ValueError("messages: the reply does not continue the generation prompt")
            completion = whole[len(prompt):-1]  # up to <|im_end|>, without its newline
            a = tokenizer(prompt, add_special_tokens=False)["input_ids"]
            b = tokenizer(completion, add_special_tokens=False)["input_ids"]
            ids = torch.tensor(a + b)
            return {"input_ids": ids, "loss_mask": torch.arange(len(ids)) >= len(a)}
    """,
    # encode(), the prefill read off the end of the prompt, a mask filled in place
    "encode_and_fill": """
        import torch
        def to_text(messages, template, thinking, gen):
            if template != "course" and template != "qwen3":
                raise ValueError("unknown template")
            try:
                roles = [m["role"] for m in messages]
                contents = [m["content"] for m in messages]
            except KeyError:
                raise ValueError("messages: missing role or content")
            seq = roles[1:] if roles and roles[0] == "system" else roles
            ok = len(seq) > 0 and all(r == "user" for r in seq[0::2]) and all(r == "assistant" for r in seq[1::2])
            if not ok:
                raise ValueError("messages: roles are not user/assistant alternating")
            last_user = max(i for i, r in enumerate(roles) if r == "user")
            pieces = []
            for i, (r, c) in enumerate(zip(roles, contents)):
                if template == "qwen3" and r == "assistant" and i < last_user and "</think>" in c:
                    c = c.split("</think>")[-1].lstrip("\\n")
                pieces.append("<|im_start|>%s\\n%s<|im_end|>\\n" % (r, c))
            if gen:
                pieces.append("<|im_start|>assistant\\n")
                pieces.append("<think>\\n\\n</think>\\n\\n" if thinking is False else ("<think>\\n" if template == "course" else ""))
            return "".join(pieces)
        def assistant_loss_mask(tokenizer, messages, template="course", thinking=None):
            to_text(messages, template, thinking, False)
            if messages[-1]["role"] != "assistant":
                raise ValueError("messages[-1] must be the assistant")
            prompt = to_text(messages[:-1], template, thinking, True)
            prefill = prompt[prompt.rindex("<|im_start|>assistant\\n") + len("<|im_start|>assistant\\n"):]
            reply = messages[-1]["content"]
            if not reply.startswith(prefill):
                raise ValueError("messages: reply without the prefill")
            p = tokenizer.encode(prompt, add_special_tokens=False)
            c = tokenizer.encode(reply[len(prefill):] + "<|im_end|>", add_special_tokens=False)
            mask = torch.zeros(len(p) + len(c), dtype=torch.bool)
            mask[len(p):] = True
            return {"input_ids": torch.tensor(p + c, dtype=torch.long), "loss_mask": mask}
    """,
}

# the fresh draws of the cases the many-draws check holds every version to (tests/test_graded.py; 40 by default)
DRAWS = 6


# ---------------------------------------------------------------- the known mistakes
MISTAKES = {
    # the prompt without its prefill, the whole reply in the mask
    "prefilled_think_counted_in_the_mask": Mistake(
        "puts the prefilled <think> of the template in the loss mask: it is part of the prompt, not of the reply",
        edited(BASE, (PROMPT, 'prompt = _render(messages[:-1], template, thinking, False) + "<|im_start|>assistant\\n"'),
                                                       (COMPLETION, COMPLETION.replace("reply[len(prefill):]", "reply"))),
        COURSE_PROMPTS + ["qwen3_thinking_false_single_turn"]),
    # the Qwen3-style default read as the course's: <think>\n prefilled
    "qwen3_default_prefilled_like_the_course": Mistake(
        "prefills <think> for the Qwen3-style template's default too, as the course's template does",
        edited(BASE, ("""            elif template == "course":
                text += "<think>\\n"
""", """            else:
                text += "<think>\\n"
"""), ('prefill = "<think>\\n" if template == "course" else ""', 'prefill = "<think>\\n"')),
        ["qwen3_default_generated_think", "qwen3_default_direct_reply"]),
    "mode_flags_inverted": Mistake(
        "reads thinking=True as the direct mode and thinking=False as the thinking mode",
        edited(BASE, ("""            if thinking is False:
                text += "<think>\\n\\n</think>\\n\\n\"""", """            if thinking:
                text += "<think>\\n\\n</think>\\n\\n\""""), (PREFILL_LINES, PREFILL_LINES.replace("if thinking is False:", "if thinking:"))),
        ["course_thinking_true_with_system", "qwen3_thinking_false_single_turn"]),
    "qwen3_keeps_the_reasoning_of_earlier_turns": Mistake(
        "keeps the reasoning of earlier assistant turns in the Qwen3-style prompt, which drops it",
        edited(BASE, (' and i < last_user and "</think>" in c:', ' and False:')),
        ["qwen3_thinking_true_multi_turn", "qwen3_thinking_false_multi_turn_with_system"]),
    "im_end_left_out": Mistake(
        "leaves <|im_end|> out of the sequence, so the model never learns to end its reply",
        edited(BASE, (COMPLETION, COMPLETION.replace(' + "<|im_end|>"', ""))),
        ["course_default_single_turn", "qwen3_default_generated_think"]),
    # <|im_end|> in the ids but not in the mask: the model never learns to stop
    "im_end_not_in_the_mask": Mistake(
        "puts <|im_end|> in the ids but not in the loss mask, so the model never learns to stop",
        edited(BASE, (COMPLETION, COMPLETION.replace(' + "<|im_end|>"', "")),
                                          (RETURN, """        end = tokenizer.convert_tokens_to_ids("<|im_end|>")
        return {"input_ids": torch.tensor(p + c + [end], dtype=torch.long),
                "loss_mask": torch.tensor([False] * len(p) + [True] * len(c) + [False])}""")),
        ["course_default_single_turn", "qwen3_default_generated_think"]),
    "im_end_with_its_newline": Mistake(
        "counts the newline after <|im_end|> as part of the reply",
        edited(BASE, (COMPLETION, COMPLETION.replace('"<|im_end|>"', '"<|im_end|>\\n"'))),
        ["course_default_single_turn", "qwen3_default_direct_reply"]),
    # the label mask of notebook 01 (shifted by one) for an unshifted sequence
    "mask_shifted_by_one": Mistake(
        "shifts the mask by one as for labels, though input_ids here are not shifted",
        edited(BASE, ("[False] * len(p) + [True] * len(c)", "[False] * (len(p) - 1) + [True] * len(c) + [False]")),
        ["course_default_single_turn", "qwen3_default_generated_think"]),
    "mask_of_integers": Mistake(
        "returns a mask of integers instead of booleans",
        edited(BASE, ("[False] * len(p) + [True] * len(c)", "[0] * len(p) + [1] * len(c)")),
        ["course_default_single_turn"]),
    # the reply's front cut off whatever it holds
    "prefill_not_checked": Mistake(
        "never checks that the reply starts with the prefill, and cuts its front off whatever it holds",
        edited(BASE, ("""        if not reply.startswith(prefill):
            raise ValueError("messages: the reply does not start with the prefill")
""", "")),
        ["error_course_reply_without_the_prefilled_think", "error_qwen3_closed_reply_with_reasoning"]),
    "last_role_not_checked": Mistake(
        "accepts a conversation whose last message is not the assistant's reply",
        edited(BASE, ("""        if messages[-1]["role"] != "assistant":
            raise ValueError("messages: the last message must be the assistant's reply")
""", "")),
        ["error_last_message_is_the_users"]),
    # only messages[:-1] checked (by rendering the prompt): two replies in a row pass
    "whole_conversation_not_checked": Mistake(
        "checks only the messages before the reply, so two assistant replies in a row pass",
        edited(BASE, ("        _render(messages, template, thinking, False)\n", "")),
        ["error_two_assistant_replies_in_a_row"]),
    # the reference's rendering borrowed: the tripwire stops it
    "calls_course_libs_render_conversation": Mistake(
        "calls course_lib's render_conversation, which is yours to write in this notebook",
        edited(BASE, ("    import torch\n", "    import torch\n    from course_lib import render_conversation\n"),
                                                          (PROMPT, "prompt = render_conversation(messages[:-1], template, thinking)")),
        ["course_default_single_turn", "qwen3_default_generated_think"],
        # it calls the reference on every case that asks for no error: the judge says so on each case,
        # and an error code alone is no evidence of this mistake, so recognition cannot name it
        recognisable=False),
}
