"""split_reasoning (notebook 13): the reference's contract, correct versions that earn full marks
through the real judge, and realistic mistakes that lose them (CONTRIBUTING.md, "Adding a graded
function")."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autograder.mistakes.split_reasoning import BASE
from course_lib import split_reasoning
from tests.helpers import PROPERTY_SETTINGS, corpus_tests, many_draws_test

SUITE = "split_reasoning"
words = st.lists(st.sampled_from(["x", "7 + 5 = 12", "so", "12", "\n", " "]), max_size=4).map("".join)


@st.composite
def blocks(draw, depth=0):
    """A balanced think block's inside: text with nested blocks (at most 3 deep)."""
    parts = [draw(words)]
    for _ in range(draw(st.integers(0, 2 if depth < 3 else 0))):
        parts += ["<think>", draw(blocks(depth + 1)), "</think>", draw(words)]
    return "".join(parts)


# ---------------------------------------------------------------- the reference
@PROPERTY_SETTINGS
@given(blocks(), words, st.sampled_from(["", " ", "\n  "]))
def test_reference_splits_at_the_matching_close_in_both_modes(inside, after, space):
    answer = after + "</think>" + after  # a stray close in the answer stays in it
    assert split_reasoning(f"{inside}</think>{answer}", True) == (inside.strip(), answer.strip())
    assert split_reasoning(f"{space}<think>{inside}</think>{answer}", False) == (inside.strip(), answer.strip())
    # read in the other mode: a block that never closes (its <think> nests), or a direct answer
    generated = f"<think>{inside}</think>{after}"
    assert split_reasoning(generated, True) == (generated.strip(), "")
    if not inside.lstrip().startswith("<think>"):
        assert split_reasoning(f"{inside}</think>{answer}", False) == (None, f"{inside}</think>{answer}".strip())


def test_reference_edge_cases():
    assert split_reasoning("  12 ", False) == (None, "12")
    assert split_reasoning("12 <think> x </think> 13", False) == (None, "12 <think> x </think> 13")
    assert split_reasoning("x </think> 12", False) == (None, "x </think> 12")
    assert split_reasoning("<think> x", False) == ("x", "")
    assert split_reasoning(" x ", True) == ("x", "")
    assert split_reasoning("a <think> b </think> c </think> 12", True) == ("a <think> b </think> c", "12")
    assert split_reasoning("<think></think>12", False) == ("", "12")
    assert split_reasoning("<think> x </think>", False) == ("x", "")


@pytest.mark.parametrize("completion, prefilled", [("<think> a <think> b </think> c", False), ("a <think> b </think> c", True)])
def test_reference_nested_block_that_never_closes(completion, prefilled):
    reasoning, answer = split_reasoning(completion, prefilled)
    assert answer == "" and reasoning.endswith("c")


CORRECT = {
    "character_scan_depth_counter": BASE,
    # a stack of opening positions over the tags found by a regex
    "regex_finditer_stack": """
        import re
        def split_reasoning(completion, prefilled):
            if not prefilled:
                m = re.match(r"\\s*<think>", completion)
                if m is None:
                    return None, completion.strip()
                body = completion[m.end():]
            else:
                body = completion
            stack = ["open"]
            for tag in re.finditer(r"</?think>", body):
                if tag.group() == "<think>":
                    stack.append("open")
                else:
                    stack.pop()
                    if not stack:
                        return body[:tag.start()].strip(), body[tag.end():].strip()
            return body.strip(), ""
    """,
    # find() of the next of either tag, a depth counter
    "find_next_tag": """
        def split_reasoning(completion, prefilled):
            OPEN, CLOSE = "<think>", "</think>"
            s = completion
            if not prefilled:
                s = s.lstrip()
                if s[:len(OPEN)] != OPEN:
                    return (None, completion.strip())
                s = s[len(OPEN):]
            depth, pos = 1, 0
            while True:
                c = s.find(CLOSE, pos)
                if c == -1:
                    return (s.strip(), "")
                o = s.find(OPEN, pos)
                if o != -1 and o < c:
                    depth += 1
                    pos = o + len(OPEN)
                else:
                    depth -= 1
                    pos = c + len(CLOSE)
                    if depth == 0:
                        return (s[:c].strip(), s[pos:].strip())
    """,
    # re.split keeping the tags, the pieces joined back until the block closes
    "re_split_pieces": """
        import re
        def split_reasoning(completion, prefilled):
            if not prefilled and not completion.lstrip().startswith("<think>"):
                return None, completion.strip()
            rest = completion if prefilled else completion.lstrip()[7:]
            pieces = re.split(r"(</?think>)", rest)
            depth, inside = 1, []
            for n, piece in enumerate(pieces):
                if piece == "<think>":
                    depth += 1
                elif piece == "</think>":
                    depth -= 1
                    if depth == 0:
                        return "".join(inside).strip(), "".join(pieces[n + 1:]).strip()
                inside.append(piece)
            return "".join(inside).strip(), ""
    """,
}


test_correct_version_earns_full_marks, test_mistake_loses_its_points = corpus_tests(SUITE, CORRECT)
test_each_version_holds_on_many_draws = many_draws_test(SUITE, CORRECT, draws=20)
