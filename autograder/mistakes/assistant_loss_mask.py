"""The known mistakes of `assistant_loss_mask` (notebook 13): the catalogue `autograder.mistakes` describes."""

from __future__ import annotations

from autograder.mistakes import Mistake, edited


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
