"""The grader's side of `thinking_format_reward` (notebook 13): how its hidden cases are drawn, the
correct versions that must earn full marks and the known mistakes that must lose them, each with the
sentence a student reads (`autograder.mistakes`). Never in a student kit or the grading sandbox,
which hold the folder's __init__.py only.

Hidden cases of `thinking_format_reward(completion, prefilled) -> float` (notebook 13): 1.0 when the
completion, read as `split_reasoning(completion, prefilled)` reads it, holds a closed think block
followed by a non-empty answer (after stripping), else 0.0. prefilled True: the prompt ended with
`<think>`, the completion starts inside the block; False: the completion must open it itself
(after whitespace). The block closes at the `</think>` that matches its opening.

Completions: arithmetic reasoning and answers in every shape, in both modes. Outputs: {"rewards"},
the reward of each completion of the case, in order (exact: 0.0 or 1.0). The tripwire forbids
calling course_lib's split_reasoning: the reward is graded on a student's own reading.

What the cases are built to catch: a reward that requires the completion to start with `<think>`
while the prompt prefilled it (every prefilled response 0: `prefilled_well_formed`), the
prefilled flag read the other way or not at all (a leading `<think>` accepted in either mode:
`prefilled_completion_that_opens_again`, `generated_without_an_opening`), a `</think>` anywhere
taken as the block's end, the block closed at the first `</think>` of a nested block
(`nested_block_that_never_closes`) or at the last (`stray_close_in_the_answer`), an empty or
whitespace answer rewarded (`empty_answers`), an empty block refused (`empty_blocks`), a block
that never closes rewarded.

The suite's tripwire forbids calling course_lib's split_reasoning: each version carries its own
reading of the block.
"""

from __future__ import annotations

import torch

from autograder.graded._thinking_texts import completions_case as case, draw_completion_parts
from autograder.mistakes import edited, Mistake


# ---------------------------------------------------------------- the hidden cases
def make_inputs(gen: torch.Generator) -> list[tuple[str, dict]]:

    r, a, k = draw_completion_parts(gen, 6)

    return [
        ("prefilled_well_formed", case((f"{r[0]}\n</think>\n\n{a[0]}", True), (f" {r[1]} </think> {a[1]}", True),
                                       (f"{r[2]}</think>{k}", True))),
        ("generated_well_formed", case((f"<think>\n{r[3]}\n</think>\n\n{a[3]}", False), (f" \n<think>{r[4]}</think>{a[4]}", False),
                                       (f"<think>\n{r[5]}\n</think>\n\n{k}", False))),
        ("empty_blocks", case((f"<think></think>{a[0]}", False), (f"\n</think>\n\n{a[1]}", True),
                              (f"<think>\n\n</think>\n\n{a[2]}", False))),
        ("prefilled_completion_that_opens_again", case((f"<think>\n{r[3]}\n</think>\n\n{a[3]}", True),
                                                       (f" <think>{r[4]}</think>{a[4]}", True))),
        ("generated_without_an_opening", case((a[5], False), (f"{r[0]} </think> {a[0]}", False),
                                              (f"{a[1]} <think>{r[1]}</think> {k}", False))),
        ("blocks_that_never_close", case((r[2], True), (f"<think>\n{r[3]}", False), (f"{a[4]} ", True))),
        ("empty_answers", case((f"{r[5]}</think>", True), (f"<think>{r[0]}</think>  \n ", False),
                               (f"{r[1]}\n</think>\n\n", True))),
        ("nested_block_well_formed", case((f"{r[2]} <think> {k} </think> {r[3]} </think> {a[2]}", True),
                                          (f"<think> {k} <think> {r[4]} </think> {k + 1} </think> {a[4]}", False))),
        ("nested_block_that_never_closes", case((f"<think> {r[5]} <think> {k} </think> {a[5]}", False),
                                                (f"{r[0]} <think> {k} </think> {a[0]}", True))),
        ("stray_close_in_the_answer", case((f"{r[1]} </think> {a[1]} </think>", True),
                                           (f"<think>{r[2]}</think> {a[2]}\n</think>\n", False))),
        ("both_modes_in_one_batch", case((f"{r[3]} </think> {a[3]}", True), (f"{r[3]} </think> {a[3]}", False),
                                         (f"<think>{r[4]}</think>{a[4]}", False), (f"<think>{r[4]}</think>{a[4]}", True))),
    ]


# ---------------------------------------------------------------- the correct versions
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

# the fresh draws of the cases the many-draws check holds every version to (tests/test_graded.py; 40 by default)
DRAWS = 20


# ---------------------------------------------------------------- the known mistakes
MISTAKES = {
    # the completion must start with <think> even when the prompt prefilled it: every prefilled response 0
    "leading_think_required_when_prefilled": Mistake(
        "requires the completion to start with <think> even when the prompt prefilled it",
        edited(BASE, (OPENING, OPENING.replace("        if not prefilled:\n", "        if True:\n"))),
        ["prefilled_well_formed", "nested_block_well_formed"]),
    "prefilled_flag_inverted": Mistake(
        "reads prefilled=True as a generated completion and False as a prefilled one",
        edited(BASE, ("        if not prefilled:\n", "        if prefilled:\n")),
        ["prefilled_well_formed", "generated_well_formed"]),
    # a leading <think> taken off in either mode
    "either_mode_accepted": Mistake(
        "takes a leading <think> off in either mode, so a prefilled completion that opens a block again counts as well formed",
        edited(BASE, (OPENING, """        text = completion.lstrip()
        if text.startswith("<think>"):
            text = text[len("<think>"):]
        elif not prefilled:
            return 0.0
""")),
        ["prefilled_completion_that_opens_again"]),
    # any </think> with text after it
    "close_anywhere": Mistake(
        "accepts any </think> with text after it, without a block opened at the start",
        """
        def thinking_format_reward(completion, prefilled):
            if "</think>" not in completion:
                return 0.0
            return 1.0 if completion.split("</think>", 1)[1].strip() else 0.0
    """,
        ["generated_without_an_opening", "prefilled_completion_that_opens_again"]),
    "first_close_ends_the_block": Mistake(
        "ends the block at the first </think>, even when a nested block is still open",
        edited(BASE, (NESTING, "            if True:")),
        ["nested_block_that_never_closes"]),
    # rpartition at the last </think>
    "last_close_ends_the_block": Mistake(
        "ends the block at the last </think> of the completion, even one in the answer",
        """
        def thinking_format_reward(completion, prefilled):
            text = completion if prefilled else completion.lstrip()
            if not prefilled:
                if not text.startswith("<think>"):
                    return 0.0
                text = text[7:]
            if "</think>" not in text:
                return 0.0
            return 1.0 if text.rpartition("</think>")[2].strip() else 0.0
    """,
        ["stray_close_in_the_answer", "nested_block_that_never_closes"]),
    "empty_answer_rewarded": Mistake(
        "rewards a block followed by no answer at all",
        edited(BASE, (ANSWER, "return 1.0")),
        ["empty_answers"]),
    "whitespace_answer_rewarded": Mistake(
        "rewards a block followed by whitespace only",
        edited(BASE, (ANSWER, 'return 1.0 if text[pos:] else 0.0')),
        ["empty_answers"]),
    "empty_block_refused": Mistake(
        "gives 0 to an empty thinking block, which is well formed",
        edited(BASE, (ANSWER, 'return 1.0 if text[pos:].strip() and text[:close].strip() else 0.0')),
        ["empty_blocks"]),
    # a block that never closes read as all answer
    "unclosed_block_rewarded": Mistake(
        "rewards a block that never closes, reading it all as the answer",
        edited(BASE, ("""            if close < 0:
                return 0.0""", """            if close < 0:
                return 1.0 if text.strip() else 0.0""")),
        ["blocks_that_never_close"]),
    # the reference's reading borrowed: the tripwire stops it
    "calls_course_libs_split_reasoning": Mistake(
        "calls course_lib's split_reasoning, which is yours to write in this notebook",
        """
        def thinking_format_reward(completion, prefilled):
            from course_lib import split_reasoning
            reasoning, answer = split_reasoning(completion, prefilled)
            return 1.0 if reasoning is not None and answer else 0.0
    """,
        ["prefilled_well_formed", "generated_well_formed"],
        # it calls the reference on every case that asks for no error: the judge says so on each case,
        # and an error code alone is no evidence of this mistake, so recognition cannot name it
        recognisable=False),
}
