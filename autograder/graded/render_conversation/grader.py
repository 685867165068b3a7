"""The grader's side of `render_conversation` (notebook 13): how its hidden cases are drawn, the
correct versions that must earn full marks and the known mistakes that must lose them, each with the
sentence a student reads (`autograder.mistakes`). Never in a student kit or the grading sandbox,
which hold the folder's __init__.py only.

Hidden cases of `render_conversation(messages, template="course", thinking=None,
add_generation_prompt=True) -> str` (notebook 13): the text `apply_chat_template(messages,
tokenize=False, ...)` gives with the course template (switch `open_thinking`) or the Qwen3-style
one (switch `enable_thinking`), the switch set to `thinking` or, when None, not passed. Each case
passes only the arguments it names, so the defaults are graded too. The folder's
test_render_conversation.py holds every expected text equal to the real Jinja template's output.

Conversations: arithmetic questions, assistant replies with a reasoning block, an empty block, no
block, two `</think>`, a `</think>` without `<think>`, an unclosed block, text right after the tag
or after spaces; an optional system message. Outputs are exact: {"text"}. Error cases must raise
ValueError (or a subclass): {"raises": "ValueError"}, "other" (another exception) or None.

What the cases are built to catch: the mode flags inverted, None taken as False (the course's
default closed), the Qwen3-style default taken as the course's (a prefilled `<think>`), the
switch ignored by one template, a wrong empty block, the generation prompt added when not asked
for; in the Qwen3 style the reasoning of earlier turns kept, the last turn's reasoning dropped
too (`*_ends_with_the_reply`), the answer cut at the first `</think>` instead of the last, the
whole answer stripped instead of its leading newlines, a regex that removes `<think>...</think>`
(and not a stray `</think>`); the course template's turns changed; a missing newline after the
last `<|im_end|>`; the system message; and the errors: an unknown template, a conversation that
is empty, starts with the assistant, repeats a role, holds a system message after the first or a
role of another kind, a message without content or role.
"""

from __future__ import annotations

import torch

from autograder.graded._thinking_texts import draw_int, draw_problems
from autograder.mistakes import edited, Mistake


# ---------------------------------------------------------------- the hidden cases
# each error case and the phrase of the reference's `Raises:` section that states it (tests/test_contracts.py)
RAISES = {
    "error_unknown_template": "an unknown template",
    "error_template_name_in_capitals": "the names are case-sensitive",
    "error_empty_conversation": "an empty conversation",
    "error_system_message_alone": "a system message alone",
    "error_starts_with_the_assistant": "a first turn that is not the user's",
    "error_two_user_messages_in_a_row": "a role twice in a row",
    "error_two_assistant_messages_in_a_row": "a role twice in a row",
    "error_system_message_after_the_first": "a system message after the first",
    "error_tool_role": "a role of another kind",
    "error_message_without_content": "a message without a `role` or a `content` key",
    "error_message_without_role": "a message without a `role` or a `content` key",
}
EMPTY = "<think>\n\n</think>\n\n"


def make_inputs(gen: torch.Generator) -> list[tuple[str, dict]]:

    probs = draw_problems(gen, 8)
    k = draw_int(gen, 10, 99)
    q = [p["question"] for p in probs]
    thought = [f"<think>\n{p['reasoning']}\n</think>\n\nThe answer is {p['answer']}." for p in probs]
    empty = [f"{EMPTY}{p['answer']}" for p in probs]
    bare = [f"It is {p['answer']}." for p in probs]
    odd = {  # assistant contents the Qwen3 style cuts in other places
        "two_closes": f"<think>\n{probs[0]['reasoning']}\n</think>\n\nMaybe {k}. </think>\n\n Then {k + 1}.",
        "close_without_open": f"{probs[1]['reasoning']} </think>\n{k} it is",
        "unclosed": f"<think>\n{probs[2]['reasoning']}",
        "no_newlines": f"<think>{probs[3]['reasoning']}</think>{k}",
        "spaces_after_close": f"<think>\n{probs[4]['reasoning']}\n</think>\n\n  So {k}.\n",
    }
    system = {"role": "system", "content": f"You are a careful tutor; think step by step ({k})."}

    def conv(*contents, sys=False):
        roles = ("user", "assistant")
        return ([system] if sys else []) + [{"role": roles[i % 2], "content": c} for i, c in enumerate(contents)]

    def case(messages, expect_error=False, **kwargs):
        return {"messages": messages, "kwargs": kwargs, "expect_error": expect_error}

    multi = conv(q[0], thought[0], q[1], empty[1], q[2], bare[2], q[3], sys=True)
    oddities = conv(q[4], odd["two_closes"], q[5], odd["close_without_open"], q[6], odd["unclosed"], q[7],
                    odd["no_newlines"], q[0], odd["spaces_after_close"], q[1])
    ends_with_reply = conv(q[2], thought[2], q[3], thought[3])
    cases = [
        ("course_single_turn_all_defaults", case(conv(q[0]))),
        ("course_single_turn_thinking_true", case(conv(q[1]), template="course", thinking=True)),
        ("course_single_turn_thinking_false", case(conv(q[2]), template="course", thinking=False)),
        ("qwen3_single_turn_default", case(conv(q[3]), template="qwen3")),
        ("qwen3_single_turn_thinking_true", case(conv(q[4]), template="qwen3", thinking=True)),
        ("qwen3_single_turn_thinking_false", case(conv(q[5]), template="qwen3", thinking=False)),
        ("course_system_single_turn_thinking_false", case(conv(q[6], sys=True), thinking=False)),
        ("qwen3_system_single_turn", case(conv(q[7], sys=True), template="qwen3")),
    ]
    for template in ("course", "qwen3"):
        for thinking in (None, True, False):
            extra = {} if thinking is None else {"thinking": thinking}
            cases.append((f"{template}_multi_turn_thinking_{thinking}".lower(), case(multi, template=template, **extra)))
        cases.append((f"{template}_earlier_replies_cut_in_other_places", case(oddities, template=template, thinking=True)))
        cases.append((f"{template}_ends_with_the_reply_no_generation_prompt",
                      case(ends_with_reply, template=template, add_generation_prompt=False)))
    cases += [
        ("qwen3_ends_with_the_reply_thinking_false_no_generation_prompt",
         case(conv(q[4], odd["spaces_after_close"], q[5], odd["two_closes"]), template="qwen3", thinking=False,
              add_generation_prompt=False)),
        ("qwen3_multi_turn_generation_prompt_passed_true", case(multi, template="qwen3", add_generation_prompt=True)),
        ("error_unknown_template", case(conv(q[0]), expect_error=True, template="chatml")),
        ("error_template_name_in_capitals", case(conv(q[1]), expect_error=True, template="Qwen3")),
        ("error_empty_conversation", case([], expect_error=True)),
        ("error_system_message_alone", case([system], expect_error=True, template="qwen3")),
        ("error_starts_with_the_assistant", case([{"role": "assistant", "content": bare[2]},
                                                  {"role": "user", "content": q[2]}], expect_error=True)),
        ("error_two_user_messages_in_a_row", case(conv(q[3]) + conv(q[4]), expect_error=True, template="qwen3")),
        ("error_two_assistant_messages_in_a_row", case(conv(q[5], bare[5]) + [{"role": "assistant", "content": bare[6]},
                                                                               {"role": "user", "content": q[6]}],
                                                       expect_error=True)),
        ("error_system_message_after_the_first", case(conv(q[7], bare[7]) + [system, {"role": "user", "content": q[0]}],
                                                      expect_error=True)),
        ("error_tool_role", case(conv(q[1], bare[1]) + [{"role": "tool", "content": str(k)}], expect_error=True,
                                 template="qwen3")),
        ("error_message_without_content", case(conv(q[2], bare[2]) + [{"role": "user"}], expect_error=True)),
        ("error_message_without_role", case([{"content": q[3]}], expect_error=True, template="qwen3")),
    ]
    return cases


# ---------------------------------------------------------------- the correct versions
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


CORRECT = {
    "loop_and_concatenate": BASE,
    # a list of parts joined at the end; the answer after the last tag with rpartition
    "parts_join_rpartition": """
        def render_conversation(messages, template="course", thinking=None, add_generation_prompt=True):
            if template not in {"course", "qwen3"}:
                raise ValueError("template must be course or qwen3")
            if any(not isinstance(m, dict) or not {"role", "content"} <= m.keys() for m in messages):
                raise ValueError("messages: each needs role and content")
            roles = [m["role"] for m in messages]
            body = roles[1:] if roles and roles[0] == "system" else roles
            if not body or any(r != ("user" if i % 2 == 0 else "assistant") for i, r in enumerate(body)):
                raise ValueError("messages: roles must alternate user/assistant")
            last_user = len(roles) - 1 - roles[::-1].index("user")
            parts = []
            for i, (role, m) in enumerate(zip(roles, messages)):
                content = m["content"]
                if template == "qwen3" and role == "assistant" and i < last_user:
                    _, sep, after = content.rpartition("</think>")
                    if sep:
                        content = after.lstrip("\\n")
                parts.append(f"<|im_start|>{role}\\n{content}<|im_end|>\\n")
            if add_generation_prompt:
                think = True if thinking is None else thinking
                parts.append("<|im_start|>assistant\\n")
                if not think:
                    parts.append("<think>\\n\\n</think>\\n\\n")
                elif template == "course":
                    parts.append("<think>\\n")
            return "".join(parts)
    """,
    # the roles as a string matched by a regex; a table of generation prompts; a greedy regex cut
    "regex_and_a_table": """
        import re
        PROMPTS = {("course", None): "<think>\\n", ("course", True): "<think>\\n",
                   ("course", False): "<think>\\n\\n</think>\\n\\n", ("qwen3", None): "", ("qwen3", True): "",
                   ("qwen3", False): "<think>\\n\\n</think>\\n\\n"}
        def render_conversation(messages, template="course", thinking=None, add_generation_prompt=True):
            if template not in ("course", "qwen3"):
                raise ValueError(f"template: {template}")
            try:
                roles = [m["role"] for m in messages]
                contents = [m["content"] for m in messages]
            except (KeyError, TypeError):
                raise ValueError("messages: a message lacks its role or content") from None
            code = "".join({"system": "s", "user": "u", "assistant": "a"}.get(r, "?") for r in roles)
            if not re.fullmatch(r"s?u(au)*a?", code):
                raise ValueError(f"messages: bad order of roles {roles}")
            last_user = code.rfind("u")
            out = []
            for i, (role, content) in enumerate(zip(roles, contents)):
                if template == "qwen3" and role == "assistant" and i < last_user:
                    content = re.sub(r"^.*</think>\\n*", "", content, flags=re.S)
                out.append("<|im_start|>%s\\n%s<|im_end|>\\n" % (role, content))
            if add_generation_prompt:
                out.append("<|im_start|>assistant\\n" + PROMPTS[(template, thinking)])
            return "".join(out)
    """,
    # index arithmetic with rfind; the roles checked in pairs
    "rfind_and_pairs": """
        def render_conversation(messages, template="course", thinking=None, add_generation_prompt=True):
            if template != "course" and template != "qwen3":
                raise ValueError("unknown template")
            for k, msg in enumerate(messages):
                if "role" not in msg:
                    raise ValueError(f"messages[{k}] has no role")
                if "content" not in msg:
                    raise ValueError(f"messages[{k}] has no content")
            rest = messages[1:] if len(messages) > 0 and messages[0]["role"] == "system" else messages
            if len(rest) == 0:
                raise ValueError("messages must hold a user message")
            for k in range(0, len(rest), 2):
                if rest[k]["role"] != "user" or (k + 1 < len(rest) and rest[k + 1]["role"] != "assistant"):
                    raise ValueError("messages must alternate user, assistant")
            last_user = max(k for k, msg in enumerate(messages) if msg["role"] == "user")
            s = ""
            for k, msg in enumerate(messages):
                c = msg["content"]
                at = c.rfind("</think>")
                if template == "qwen3" and msg["role"] == "assistant" and k < last_user and at >= 0:
                    c = c[at + len("</think>"):].lstrip("\\n")
                s = s + "<|im_start|>" + msg["role"] + "\\n" + c + "<|im_end|>" + "\\n"
            if not add_generation_prompt:
                return s
            s += "<|im_start|>assistant\\n"
            if thinking is False:
                return s + "<think>\\n\\n</think>\\n\\n"
            return s + ("<think>\\n" if template == "course" else "")
    """,
}

# the fresh draws of the cases the many-draws check holds every version to (tests/test_graded.py; 40 by default)
DRAWS = 10


# ---------------------------------------------------------------- the known mistakes
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
