"""Hidden cases of `render_conversation(messages, template="course", thinking=None,
add_generation_prompt=True) -> str` (notebook 13): the text `apply_chat_template(messages,
tokenize=False, ...)` gives with the course template (switch `open_thinking`) or the Qwen3-style
one (switch `enable_thinking`), the switch set to `thinking` or, when None, not passed. Each case
passes only the arguments it names, so the defaults are graded too. tests/graded/
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

GRADED = "render_conversation"
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
    from ._thinking_texts import draw_problems, draw_int

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


def call(fn, inputs: dict) -> dict:
    messages = [dict(m) for m in inputs["messages"]]
    if inputs["expect_error"]:
        try:
            fn(messages, **inputs["kwargs"])
        except Exception as e:  # noqa: BLE001 - which exception is the output
            return {"raises": "ValueError" if isinstance(e, ValueError) else "other"}
        return {"raises": None}
    return {"text": fn(messages, **inputs["kwargs"])}
