"""thinking_format_reward (notebook 13): the reference's contract, correct versions that earn full
marks through the real judge, and realistic mistakes that lose them (CONTRIBUTING.md, "Adding a
graded function").

The suite's tripwire forbids calling course_lib's split_reasoning: each version carries its own
reading of the block."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autograder.mistakes.thinking_format_reward import BASE
from course_lib import split_reasoning, thinking_format_reward
from tests.helpers import PROPERTY_SETTINGS, corpus_tests, many_draws_test

SUITE = "thinking_format_reward"
texts = st.lists(st.sampled_from(["<think>", "</think>", "x", " 12", "\n", "  "]), max_size=8).map("".join)


# ---------------------------------------------------------------- the reference
@PROPERTY_SETTINGS
@given(texts, st.booleans())
def test_reference_is_1_iff_a_closed_block_is_followed_by_an_answer(completion, prefilled):
    reasoning, answer = split_reasoning(completion, prefilled)
    closed = reasoning is not None and answer != ""  # a block that never closes has no answer
    assert thinking_format_reward(completion, prefilled) == (1.0 if closed else 0.0)


@pytest.mark.parametrize("completion, prefilled, reward", [
    (" 2 + 2 = 4 </think> 4", True, 1.0),  # prefilled: the completion starts inside the block
    ("<think> 2 + 2 = 4 </think> 4", False, 1.0),  # generated: it opens the block itself
    ("<think> 2 + 2 = 4 </think> 4", True, 0.0),  # a second <think>: a nested block that never closes
    (" 2 + 2 = 4 </think> 4", False, 0.0),  # no opening
    ("4", False, 0.0),
    ("<think></think>4", False, 1.0),
    ("<think> a <think> b </think> 4", False, 0.0),
    ("a </think>  \n", True, 0.0),
])
def test_reference_in_both_modes(completion, prefilled, reward):
    assert thinking_format_reward(completion, prefilled) == reward
    assert isinstance(thinking_format_reward(completion, prefilled), float)


CORRECT = {
    "find_depth_counter": BASE,
    # its own split_reasoning (a regex stack), then the test of the answer
    "own_split_then_check": """
        import re
        def my_split(completion, prefilled):
            if prefilled:
                body = completion
            else:
                m = re.match(r"\\s*<think>", completion)
                if not m:
                    return None, completion.strip()
                body = completion[m.end():]
            depth = 1
            for tag in re.finditer(r"</?think>", body):
                depth += 1 if tag.group() == "<think>" else -1
                if depth == 0:
                    return body[:tag.start()].strip(), body[tag.end():].strip()
            return body.strip(), ""
        def thinking_format_reward(completion, prefilled):
            reasoning, answer = my_split(completion, prefilled)
            return float(reasoning is not None and len(answer) > 0)
    """,
    # <think> prepended when prefilled, so both modes read the same text
    "prepend_the_prefill": """
        def thinking_format_reward(completion, prefilled):
            s = ("<think>" + completion) if prefilled else completion.lstrip()
            if not s.startswith("<think>"):
                return 0.0
            depth, i = 0, 0
            while i < len(s):
                if s.startswith("<think>", i):
                    depth, i = depth + 1, i + 7
                elif s.startswith("</think>", i):
                    depth, i = depth - 1, i + 8
                    if depth == 0:
                        return 1.0 if s[i:].strip() != "" else 0.0
                else:
                    i += 1
            return 0.0
    """,
    # re.split into tags and text, a counter
    "re_split_counter": """
        import re
        def thinking_format_reward(completion, prefilled):
            if not prefilled:
                if not completion.lstrip().startswith("<think>"):
                    return 0.0
                completion = completion.lstrip()[len("<think>"):]
            parts = re.split(r"(<think>|</think>)", completion)
            level = 1
            for j, part in enumerate(parts):
                if part == "<think>":
                    level += 1
                elif part == "</think>":
                    level -= 1
                    if level == 0:
                        answer = "".join(parts[j + 1:]).strip()
                        return 1.0 if answer else 0.0
            return 0.0
    """,
}


test_correct_version_earns_full_marks, test_mistake_loses_its_points = corpus_tests(SUITE, CORRECT)
test_each_version_holds_on_many_draws = many_draws_test(SUITE, CORRECT, draws=20)
