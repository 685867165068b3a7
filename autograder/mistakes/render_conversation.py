"""The known mistakes of `render_conversation` (notebook 13): the catalogue `autograder.mistakes` describes."""

from __future__ import annotations

from autograder.mistakes import Mistake, edited


BASE = """
    EMPTY = "<think>\\n\\n</think>\\n\\n"
    def render_conversation(messages, template="course", thinking=None, add_generation_prompt=True):
        if template not in ("course", "qwen3"):
            raise ValueError(f"unknown template {template!r}")
        for m in messages:
            if "role" not in m or "content" not in m:
                raise ValueError("messages: every message needs a role and a content")
        start = 1 if messages and messages[0]["role"] == "system" else 0
        if len(messages) <= start:
            raise ValueError("messages: no user message")
        for i, m in enumerate(messages[start:]):
            expected = "user" if i % 2 == 0 else "assistant"
            if m["role"] != expected:
                raise ValueError(f"messages: expected {expected} at position {start + i}, got {m['role']}")
        last_user = 0
        for i, m in enumerate(messages):
            if m["role"] == "user":
                last_user = i
        text = ""
        for i, m in enumerate(messages):
            content = m["content"]
            if template == "qwen3" and m["role"] == "assistant" and i < last_user:
                if "</think>" in content:
                    content = content.split("</think>")[-1].lstrip("\\n")
            text += "<|im_start|>" + m["role"] + "\\n" + content + "<|im_end|>\\n"
        if add_generation_prompt:
            text += "<|im_start|>assistant\\n"
            if template == "course":
                text += EMPTY if thinking is False else "<think>\\n"
            elif thinking is False:
                text += EMPTY
        return text
"""

PROMPT = """            if template == "course":
                text += EMPTY if thinking is False else "<think>\\n"
            elif thinking is False:
                text += EMPTY
"""

CUT = 'content = content.split("</think>")[-1].lstrip("\\n")'

ROLES = """        for i, m in enumerate(messages[start:]):
            expected = "user" if i % 2 == 0 else "assistant"
            if m["role"] != expected:
                raise ValueError(f"messages: expected {expected} at position {start + i}, got {m['role']}")
"""

MISTAKES = {
    # True renders the empty block, False and None the open one
    "mode_flags_inverted": Mistake(
        "renders the empty block for thinking=True and the open one for False, the wrong way round",
        edited(BASE, ('text += EMPTY if thinking is False else "<think>\\n"',
                                              'text += EMPTY if thinking else "<think>\\n"'),
                                       ("elif thinking is False:", "elif thinking:")),
        ["course_single_turn_thinking_true", "course_single_turn_thinking_false",
         "qwen3_single_turn_thinking_true", "qwen3_single_turn_thinking_false"]),
    # `not thinking`: the default None closes the block too
    "none_taken_as_false": Mistake(
        "treats the default thinking=None as False, closing the block",
        edited(BASE, ("text += EMPTY if thinking is False else", "text += EMPTY if not thinking else"),
                                       ("elif thinking is False:", "elif not thinking:")),
        ["course_single_turn_all_defaults", "qwen3_single_turn_default", "course_multi_turn_thinking_none"]),
    # the Qwen3 style read as the course's: its default prefills <think>
    "qwen3_default_prefilled_like_the_course": Mistake(
        "prefills <think> for the Qwen3-style template's default as the course's template does",
        edited(BASE, (PROMPT, """            text += EMPTY if thinking is False else "<think>\\n"
""")),
        ["qwen3_single_turn_default", "qwen3_single_turn_thinking_true"]),
    "qwen3_switch_ignored": Mistake(
        "ignores thinking=False for the Qwen3-style template",
        edited(BASE, ("""            elif thinking is False:
                text += EMPTY
""", "")),
        ["qwen3_single_turn_thinking_false", "qwen3_multi_turn_thinking_false"]),
    "empty_block_without_its_blank_line": Mistake(
        "renders the empty block without the blank line after </think>",
        edited(BASE, ('EMPTY = "<think>\\n\\n</think>\\n\\n"',
                                                             'EMPTY = "<think>\\n\\n</think>\\n"')),
        ["course_single_turn_thinking_false", "qwen3_single_turn_thinking_false"]),
    "generation_prompt_always_added": Mistake(
        "adds the generation prompt even when add_generation_prompt is False",
        edited(BASE, ("        if add_generation_prompt:\n", "        if True:\n")),
        ["course_ends_with_the_reply_no_generation_prompt",
         "qwen3_ends_with_the_reply_no_generation_prompt"]),
    "qwen3_keeps_the_reasoning_of_earlier_turns": Mistake(
        "keeps the reasoning of earlier assistant turns in the Qwen3-style template, which drops it",
        edited(BASE, ("""            if template == "qwen3" and m["role"] == "assistant" and i < last_user:
                if "</think>" in content:
                    %s
""" % CUT, "")),
        ["qwen3_multi_turn_thinking_none", "qwen3_earlier_replies_cut_in_other_places"]),
    # every assistant turn cut, the reply after the last user message too
    "qwen3_drops_the_last_replys_reasoning_too": Mistake(
        "drops the reasoning of the reply after the last user message too, not only of earlier turns",
        edited(BASE, ('m["role"] == "assistant" and i < last_user:',
                                                                     'm["role"] == "assistant":')),
        ["qwen3_ends_with_the_reply_no_generation_prompt"]),
    "answer_cut_at_the_first_close": Mistake(
        "cuts an earlier reply at its first </think> instead of its last",
        edited(BASE, ('content.split("</think>")[-1]', 'content.split("</think>")[1]')),
        ["qwen3_earlier_replies_cut_in_other_places"]),
    "answer_stripped_not_only_leading_newlines": Mistake(
        "strips all whitespace around an earlier reply's answer instead of only its leading newlines",
        edited(BASE, ('[-1].lstrip("\\n")', '[-1].strip()')),
        ["qwen3_earlier_replies_cut_in_other_places"]),
    # removes <think>...</think> blocks: a stray </think> and the text before a second one stay
    "regex_removes_think_blocks": Mistake(
        "removes <think>...</think> blocks with a regex instead of keeping what follows the last </think>",
        edited(BASE, ("    def render_conversation(", "    import re\n    def render_conversation("),
                                              (CUT, 'content = re.sub(r"<think>.*?</think>\\n*", "", content, flags=re.S)')),
        ["qwen3_earlier_replies_cut_in_other_places"]),
    # the reasoning of earlier turns dropped by the course template too
    "course_drops_earlier_reasoning_too": Mistake(
        "drops the reasoning of earlier turns in the course's template too, which keeps it",
        edited(BASE, ('if template == "qwen3" and m["role"] == "assistant"',
                                                             'if m["role"] == "assistant"')),
        ["course_multi_turn_thinking_none", "course_earlier_replies_cut_in_other_places"]),
    # "\n".join of the turns: no newline after the last <|im_end|> when no generation prompt follows
    "newline_after_the_last_message_missing": Mistake(
        "leaves out the newline after the last <|im_end|>",
        edited(BASE, ('text += "<|im_start|>" + m["role"] + "\\n" + content + "<|im_end|>\\n"',
                                                                 'text += ("\\n" if text else "") + "<|im_start|>" + m["role"] + "\\n" + content + "<|im_end|>"'),
                                                                ('text += "<|im_start|>assistant\\n"', 'text += "\\n<|im_start|>assistant\\n"')),
        ["course_ends_with_the_reply_no_generation_prompt",
         "qwen3_ends_with_the_reply_no_generation_prompt"]),
    "roles_not_checked": Mistake(
        "accepts roles out of the user/assistant order (or unknown roles) instead of raising ValueError",
        edited(BASE, (ROLES, "")),
        ["error_starts_with_the_assistant", "error_two_user_messages_in_a_row",
         "error_two_assistant_messages_in_a_row", "error_tool_role"]),
    "system_messages_allowed_anywhere": Mistake(
        "accepts a system message after the first position instead of raising ValueError",
        edited(BASE, ("for i, m in enumerate(messages[start:]):",
                                                           'for i, m in enumerate([m for m in messages[start:] if m["role"] != "system"]):')),
        ["error_system_message_after_the_first"]),
    "empty_conversation_accepted": Mistake(
        "accepts a conversation without a user message instead of raising ValueError",
        edited(BASE, ("""        if len(messages) <= start:
            raise ValueError("messages: no user message")
""", "")),
        ["error_empty_conversation", "error_system_message_alone"]),
    "unknown_template_rendered_as_the_course": Mistake(
        "renders an unknown template name as the course's instead of raising ValueError",
        edited(BASE, ("""        if template not in ("course", "qwen3"):
            raise ValueError(f"unknown template {template!r}")
""", "")),
        ["error_unknown_template", "error_template_name_in_capitals"]),
    # a KeyError, not the ValueError asked for
    "missing_role_or_content_not_checked": Mistake(
        "reads a message without role or content as m[...], which raises KeyError instead of ValueError",
        edited(BASE, ("""        for m in messages:
            if "role" not in m or "content" not in m:
                raise ValueError("messages: every message needs a role and a content")
""", "")),
        ["error_message_without_content", "error_message_without_role"]),
}
