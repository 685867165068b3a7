"""render_conversation (notebook 13): the reference's contract (equal to `apply_chat_template` of the
real Jinja templates, the course's and the Qwen3-style one). Its correct versions and known mistakes
are in grader.py (tests/test_graded.py runs them through the judge).
"""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from course_lib import render_conversation
from tests.helpers import course_tokenizer, PROPERTY_SETTINGS


SUITE = "render_conversation"
SWITCH = {"course": "open_thinking", "qwen3": "enable_thinking"}
_TOKENIZERS: dict = {}


def real_template(messages, template="course", thinking=None, add_generation_prompt=True):
    """The text the real Jinja template gives: the course tokenizer, or a copy with QWEN3_STYLE_TEMPLATE."""
    if not _TOKENIZERS:
        from course_lib.world.tokenizer_build import QWEN3_STYLE_TEMPLATE, with_chat_template

        tok = course_tokenizer()
        _TOKENIZERS.update(course=tok, qwen3=with_chat_template(tok, QWEN3_STYLE_TEMPLATE))
    switch = {} if thinking is None else {SWITCH[template]: thinking}
    return _TOKENIZERS[template].apply_chat_template(messages, tokenize=False,
                                                     add_generation_prompt=add_generation_prompt, **switch)


PIECES = ["<think>", "</think>", "\n", "\n\n", " ", "  ", "x", "7 + 5 = 12", "So 12.", "<|endoftext|>", "\t"]
contents = st.lists(st.sampled_from(PIECES), max_size=8).map("".join)


@st.composite
def conversations(draw):
    """An optional system message, then 1 to 7 alternating user/assistant messages."""
    messages = [{"role": "system", "content": draw(contents)}] if draw(st.booleans()) else []
    for i in range(draw(st.integers(1, 7))):
        messages.append({"role": ("user", "assistant")[i % 2], "content": draw(contents)})
    return messages


# ---------------------------------------------------------------- the reference
@PROPERTY_SETTINGS
@given(conversations(), st.sampled_from(["course", "qwen3"]), st.sampled_from([None, True, False]), st.booleans())
def test_reference_is_the_real_templates_output(messages, template, thinking, add_generation_prompt):
    got = render_conversation(messages, template=template, thinking=thinking, add_generation_prompt=add_generation_prompt)
    assert got == real_template(messages, template, thinking, add_generation_prompt)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_hidden_case_is_the_real_templates_output(seed):
    from autograder.cases import make_suite_cases

    checked = 0
    for case in make_suite_cases(SUITE, seed)["cases"]:
        if not case["inputs"]["expect_error"]:
            inputs = case["inputs"]
            assert case["expected"]["text"].truth == real_template(inputs["messages"], **inputs["kwargs"]), case["name"]
            checked += 1
    assert checked >= 15


def test_reference_modes_and_defaults():
    chat = [{"role": "user", "content": "2 + 2?"}]
    head = "<|im_start|>user\n2 + 2?<|im_end|>\n<|im_start|>assistant\n"
    assert render_conversation(chat) == render_conversation(chat, thinking=True) == head + "<think>\n"
    assert render_conversation(chat, thinking=False) == head + "<think>\n\n</think>\n\n"
    assert render_conversation(chat, template="qwen3") == render_conversation(chat, "qwen3", True) == head
    assert render_conversation(chat, template="qwen3", thinking=False) == head + "<think>\n\n</think>\n\n"
    assert render_conversation(chat, add_generation_prompt=False) == "<|im_start|>user\n2 + 2?<|im_end|>\n"


def test_reference_qwen3_drops_earlier_reasoning_so_turns_do_not_extend():
    """The course template renders turn 2's prompt as an extension of turn 1's whole text; the
    Qwen3 style does not (the multi-turn prefix a trainer must not assume)."""
    turn1 = [{"role": "user", "content": "2 + 2?"}, {"role": "assistant", "content": "<think>\n2 + 2 = 4\n</think>\n\n4"}]
    turn2 = turn1 + [{"role": "user", "content": "and 3 + 3?"}]
    for template, extends in (("course", True), ("qwen3", False)):
        whole = render_conversation(turn1, template=template, add_generation_prompt=False)
        assert render_conversation(turn2, template=template).startswith(whole) is extends
    assert "2 + 2 = 4" not in render_conversation(turn2, template="qwen3")
    assert "<|im_start|>assistant\n4<|im_end|>" in render_conversation(turn2, template="qwen3")


@pytest.mark.parametrize("messages, template, match", [
    ([{"role": "user", "content": "q"}], "chatml", "template"),
    ([], "course", "roles"),
    ([{"role": "system", "content": "s"}], "qwen3", "roles"),
    ([{"role": "assistant", "content": "a"}, {"role": "user", "content": "q"}], "course", "roles"),
    ([{"role": "user", "content": "q"}, {"role": "user", "content": "q"}], "course", "roles"),
    ([{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}, {"role": "system", "content": "s"}],
     "qwen3", "roles"),
    ([{"role": "user"}], "course", r"messages\[0\]"),
    ([{"role": "user", "content": "q"}, {"content": "a"}], "qwen3", r"messages\[1\]"),
])
def test_reference_errors(messages, template, match):
    with pytest.raises(ValueError, match=match):
        render_conversation(messages, template=template)
