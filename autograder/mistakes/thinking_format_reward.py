"""The known mistakes of `thinking_format_reward` (notebook 13): the catalogue `autograder.mistakes` describes."""

from __future__ import annotations

from autograder.mistakes import Mistake, edited


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
