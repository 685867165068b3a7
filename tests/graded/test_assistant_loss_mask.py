"""assistant_loss_mask (notebook 13): the reference's contract, correct versions that earn full marks
through the real judge, and realistic mistakes that lose them (CONTRIBUTING.md, "Adding a graded
function").

The suite's tripwire forbids calling course_lib's render_conversation: each version carries its
own rendering of the two templates."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from autograder.mistakes.assistant_loss_mask import BASE
from course_lib import assistant_loss_mask, render_conversation
from tests.helpers import PROPERTY_SETTINGS, corpus_tests, course_tokenizer, many_draws_test

SUITE = "assistant_loss_mask"
EMPTY = "<think>\n\n</think>\n\n"
PREFILL = {("course", None): "<think>\n", ("course", True): "<think>\n", ("course", False): EMPTY,
           ("qwen3", None): "", ("qwen3", True): "", ("qwen3", False): EMPTY}
_TOKENIZER: list = []


def tokenizer():
    if not _TOKENIZER:
        _TOKENIZER.append(course_tokenizer())
    return _TOKENIZER[0]


texts = st.lists(st.sampled_from(["x", "7 + 5 = 12", "\n", " ", "<think>", "</think>", "12"]), max_size=6).map("".join)


@st.composite
def conversations(draw):
    """(messages ending with the assistant's reply, template, thinking): the reply starts with the prefill."""
    template, thinking = draw(st.sampled_from(sorted(PREFILL, key=str)))
    messages = [{"role": "system", "content": draw(texts)}] if draw(st.booleans()) else []
    for i in range(2 * draw(st.integers(1, 3)) - 1):
        messages.append({"role": ("user", "assistant")[i % 2], "content": draw(texts)})
    messages.append({"role": "assistant", "content": PREFILL[template, thinking] + draw(texts)})
    return messages, template, thinking


# ---------------------------------------------------------------- the reference
@PROPERTY_SETTINGS
@given(conversations())
def test_reference_masks_exactly_the_reply_after_the_prefill(drawn):
    messages, template, thinking = drawn
    out = assistant_loss_mask(tokenizer(), messages, template=template, thinking=thinking)
    ids, mask = out["input_ids"], out["loss_mask"]
    assert ids.dtype == torch.long and mask.dtype == torch.bool and ids.shape == mask.shape
    n_prompt = int((~mask).sum())
    assert mask[n_prompt:].all()  # the mask is one run at the end
    prompt = render_conversation(messages[:-1], template=template, thinking=thinking)
    reply = messages[-1]["content"][len(PREFILL[template, thinking]):]
    assert tokenizer().decode(ids[:n_prompt]) == prompt
    assert tokenizer().decode(ids[n_prompt:]) == reply + "<|im_end|>"
    # the whole conversation rendered is the prompt, the rest of the reply and <|im_end|>\n
    assert render_conversation(messages, template=template, add_generation_prompt=False) == prompt + reply + "<|im_end|>\n"


def test_reference_prefilled_think_is_the_prompts_generated_think_the_replys():
    reply = "<think>\n2 + 2 = 4\n</think>\n\n4"
    messages = [{"role": "user", "content": "2 + 2?"}, {"role": "assistant", "content": reply}]
    think = tokenizer().convert_tokens_to_ids("<think>")
    for template, masked in (("course", False), ("qwen3", True)):
        out = assistant_loss_mask(tokenizer(), messages, template=template)
        at = out["input_ids"].tolist().index(think)
        assert bool(out["loss_mask"][at]) is masked
        assert out["loss_mask"][-1] and out["input_ids"][-1] == tokenizer().convert_tokens_to_ids("<|im_end|>")


@pytest.mark.parametrize("messages, kwargs, match", [
    ([{"role": "user", "content": "q"}, {"role": "assistant", "content": "4"}], {}, "start with"),
    ([{"role": "user", "content": "q"}, {"role": "assistant", "content": "<think>\nx</think>4"}], {"template": "qwen3", "thinking": False}, "start with"),
    ([{"role": "user", "content": "q"}, {"role": "assistant", "content": "4"}, {"role": "user", "content": "q"}],
     {"template": "qwen3"}, "last message"),
    ([{"role": "user", "content": "q"}, {"role": "assistant", "content": "4"}, {"role": "assistant", "content": "5"}],
     {"template": "qwen3"}, "roles"),
    ([{"role": "user", "content": "q"}, {"role": "assistant", "content": "4"}], {"template": "chatml"}, "template"),
])
def test_reference_errors(messages, kwargs, match):
    with pytest.raises(ValueError, match=match):
        assistant_loss_mask(tokenizer(), messages, **kwargs)


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


test_correct_version_earns_full_marks, test_mistake_loses_its_points = corpus_tests(SUITE, CORRECT)
test_each_version_holds_on_many_draws = many_draws_test(SUITE, CORRECT, draws=6)
