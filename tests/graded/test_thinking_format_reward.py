"""thinking_format_reward (notebook 13): the reference's contract, correct versions that earn full
marks through the real judge, and realistic mistakes that lose them (CONTRIBUTING.md, "Adding a
graded function").

The suite's tripwire forbids calling course_lib's split_reasoning: each version carries its own
reading of the block."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from course_lib import split_reasoning, thinking_format_reward
from tests.helpers import PROPERTY_SETTINGS, corpus_tests, edited, many_draws_test

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


# ---------------------------------------------------------------- correct versions and mistakes
BASE = """
    def thinking_format_reward(completion, prefilled):
        text = completion
        if not prefilled:
            text = completion.lstrip()
            if not text.startswith("<think>"):
                return 0.0
            text = text[len("<think>"):]
        depth = 1
        pos = 0
        while True:
            close = text.find("</think>", pos)
            if close < 0:
                return 0.0
            opened = text.find("<think>", pos)
            if 0 <= opened < close:
                depth += 1
                pos = opened + len("<think>")
            else:
                depth -= 1
                pos = close + len("</think>")
                if depth == 0:
                    return 1.0 if text[pos:].strip() else 0.0
"""
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

OPENING = """        if not prefilled:
            text = completion.lstrip()
            if not text.startswith("<think>"):
                return 0.0
            text = text[len("<think>"):]
"""
NESTING = """            opened = text.find("<think>", pos)
            if 0 <= opened < close:
                depth += 1
                pos = opened + len("<think>")
            else:"""
ANSWER = 'return 1.0 if text[pos:].strip() else 0.0'
MISTAKES = {
    # the completion must start with <think> even when the prompt prefilled it: every prefilled response 0
    "leading_think_required_when_prefilled": (edited(BASE, (OPENING, OPENING.replace("        if not prefilled:\n", "        if True:\n"))),
                                              ["prefilled_well_formed", "nested_block_well_formed"]),
    "prefilled_flag_inverted": (edited(BASE, ("        if not prefilled:\n", "        if prefilled:\n")),
                                ["prefilled_well_formed", "generated_well_formed"]),
    # a leading <think> taken off in either mode
    "either_mode_accepted": (edited(BASE, (OPENING, """        text = completion.lstrip()
        if text.startswith("<think>"):
            text = text[len("<think>"):]
        elif not prefilled:
            return 0.0
""")), ["prefilled_completion_that_opens_again"]),
    # any </think> with text after it
    "close_anywhere": ("""
        def thinking_format_reward(completion, prefilled):
            if "</think>" not in completion:
                return 0.0
            return 1.0 if completion.split("</think>", 1)[1].strip() else 0.0
    """, ["generated_without_an_opening", "prefilled_completion_that_opens_again"]),
    "first_close_ends_the_block": (edited(BASE, (NESTING, "            if True:")),
                                   ["nested_block_that_never_closes"]),
    # rpartition at the last </think>
    "last_close_ends_the_block": ("""
        def thinking_format_reward(completion, prefilled):
            text = completion if prefilled else completion.lstrip()
            if not prefilled:
                if not text.startswith("<think>"):
                    return 0.0
                text = text[7:]
            if "</think>" not in text:
                return 0.0
            return 1.0 if text.rpartition("</think>")[2].strip() else 0.0
    """, ["stray_close_in_the_answer", "nested_block_that_never_closes"]),
    "empty_answer_rewarded": (edited(BASE, (ANSWER, "return 1.0")), ["empty_answers"]),
    "whitespace_answer_rewarded": (edited(BASE, (ANSWER, 'return 1.0 if text[pos:] else 0.0')), ["empty_answers"]),
    "empty_block_refused": (edited(BASE, (ANSWER, 'return 1.0 if text[pos:].strip() and text[:close].strip() else 0.0')),
                            ["empty_blocks"]),
    # a block that never closes read as all answer
    "unclosed_block_rewarded": (edited(BASE, ("""            if close < 0:
                return 0.0""", """            if close < 0:
                return 1.0 if text.strip() else 0.0""")), ["blocks_that_never_close"]),
    # the reference's reading borrowed: the tripwire stops it
    "calls_course_libs_split_reasoning": ("""
        def thinking_format_reward(completion, prefilled):
            from course_lib import split_reasoning
            reasoning, answer = split_reasoning(completion, prefilled)
            return 1.0 if reasoning is not None and answer else 0.0
    """, ["prefilled_well_formed", "generated_well_formed"]),
}

test_correct_version_earns_full_marks, test_mistake_loses_its_points = corpus_tests(SUITE, CORRECT, MISTAKES)
test_each_version_holds_on_many_draws = many_draws_test(SUITE, CORRECT, MISTAKES, draws=20)
