"""assistant_loss_mask (notebook 13): the reference's contract. Its correct versions and known mistakes
are in grader.py (tests/test_graded.py runs them through the judge).
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, strategies as st

from course_lib import assistant_loss_mask, render_conversation
from tests.helpers import course_tokenizer, PROPERTY_SETTINGS


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
