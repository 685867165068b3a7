"""render_conversation (notebook 13): the reference's contract (equal to `apply_chat_template` of the
real Jinja templates, the course's and the Qwen3-style one), correct versions that earn full marks
through the real judge, and realistic mistakes that lose them (CONTRIBUTING.md, "Adding a graded
function")."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autograder.mistakes.render_conversation import BASE
from course_lib import render_conversation
from tests.helpers import PROPERTY_SETTINGS, corpus_tests, course_tokenizer, many_draws_test

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


test_correct_version_earns_full_marks, test_mistake_loses_its_points = corpus_tests(SUITE, CORRECT)
test_each_version_holds_on_many_draws = many_draws_test(SUITE, CORRECT, draws=10)
