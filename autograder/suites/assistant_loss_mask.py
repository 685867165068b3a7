"""Hidden cases of `assistant_loss_mask(tokenizer, messages, template="course", thinking=None) -> dict`
(notebook 13): prompt = render_conversation(messages[:-1], template, thinking,
add_generation_prompt=True); completion = the last message's content (the assistant's reply)
without what the generation prompt prefilled (`<think>\\n`, the empty block or nothing), then
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
"""

from __future__ import annotations

import torch

from autograder.suite_api import course_tokenizer

GRADED = "assistant_loss_mask"
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
TRIPWIRE = ["assistant_loss_mask", "render_conversation"]
WARM = ("transformers", "tokenizers")  # imported by a judge runner started ahead (autograder.judge)
EMPTY = "<think>\n\n</think>\n\n"



def make_inputs(gen: torch.Generator) -> list[tuple[str, dict]]:
    from ._thinking_texts import draw_int, draw_problems

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


def call(fn, inputs: dict) -> dict:
    messages = [dict(m) for m in inputs["messages"]]
    tokenizer = course_tokenizer()
    if inputs["expect_error"]:
        try:
            fn(tokenizer, messages, **inputs["kwargs"])
        except Exception as e:  # noqa: BLE001 - which exception is the output
            return {"raises": "ValueError" if isinstance(e, ValueError) else "other"}
        return {"raises": None}
    out = fn(tokenizer, messages, **inputs["kwargs"])
    return {"input_ids": out["input_ids"], "loss_mask": out["loss_mask"]}
