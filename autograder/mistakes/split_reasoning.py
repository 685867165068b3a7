"""The known mistakes of `split_reasoning` (notebook 13): the catalogue `autograder.mistakes` describes."""

from __future__ import annotations

from autograder.mistakes import Mistake, edited


BASE = """
    def split_reasoning(completion, prefilled):
        if prefilled:
            text = completion
        else:
            text = completion.lstrip()
            if not text.startswith("<think>"):
                return None, completion.strip()
            text = text[len("<think>"):]
        depth = 1
        i = 0
        while i < len(text):
            if text.startswith("<think>", i):
                depth += 1
                i += len("<think>")
            elif text.startswith("</think>", i):
                depth -= 1
                if depth == 0:
                    return text[:i].strip(), text[i + len("</think>"):].strip()
                i += len("</think>")
            else:
                i += 1
        return text.strip(), ""
"""

RETURN_UNCLOSED = 'return text.strip(), ""'

STRIPPED = 'return text[:i].strip(), text[i + len("</think>"):].strip()'

NESTING = """            if text.startswith("<think>", i):
                depth += 1
                i += len("<think>")
            elif"""

MISTAKES = {
    # the first </think> closes the block, nested or not
    "split_at_the_first_close": Mistake(
        "ends the block at the first </think>, even when a nested block is still open",
        edited(BASE, (NESTING, "            if")),
        ["nested_block_prefilled", "nested_block_generated", "nested_block_that_never_closes"]),
    "split_at_the_last_close": Mistake(
        "ends the block at the last </think> of the completion, even one in the answer",
        """
        def split_reasoning(completion, prefilled):
            text = completion if prefilled else completion.lstrip()
            if not prefilled:
                if not text.startswith("<think>"):
                    return None, completion.strip()
                text = text[len("<think>"):]
            if "</think>" not in text:
                return text.strip(), ""
            reasoning, _, answer = text.rpartition("</think>")
            return reasoning.strip(), answer.strip()
    """,
        ["stray_close_in_the_answer", "nested_block_that_never_closes"]),
    # a regex, non-greedy: the first close
    "regex_non_greedy": Mistake(
        "finds the block with a non-greedy regex, which ends it at the first </think> whatever the nesting",
        """
        import re
        def split_reasoning(completion, prefilled):
            text = ("<think>" + completion) if prefilled else completion
            m = re.match(r"\\s*<think>(.*?)</think>(.*)", text, flags=re.S)
            if m:
                return m.group(1).strip(), m.group(2).strip()
            m = re.match(r"\\s*<think>(.*)", text, flags=re.S)
            if m:
                return m.group(1).strip(), ""
            return None, completion.strip()
    """,
        ["nested_block_prefilled", "nested_block_generated", "prefilled_completion_that_opens_again"]),
    "prefilled_ignored": Mistake(
        "ignores prefilled=True and expects the completion to open its own <think>",
        edited(BASE, ("        if prefilled:\n", "        if False:\n")),
        ["prefilled_single_block", "nested_block_prefilled"]),
    "every_completion_read_as_prefilled": Mistake(
        "reads every completion as prefilled, also one that opens its own <think>",
        edited(BASE, ("        if prefilled:\n", "        if True:\n")),
        ["generated_single_block", "generated_direct_answers"]),
    "nothing_stripped": Mistake(
        "does not strip the reasoning and the answer",
        edited(BASE, (STRIPPED, 'return text[:i], text[i + len("</think>"):]'), (RETURN_UNCLOSED, 'return text, ""')),
        ["prefilled_single_block", "generated_single_block"]),
    "direct_answer_not_stripped": Mistake(
        "does not strip a direct answer (a completion without a block)",
        edited(BASE, ("return None, completion.strip()", "return None, completion")),
        ["generated_direct_answers"]),
    "unclosed_block_gives_none": Mistake(
        "returns None as the reasoning of a block that never closes, instead of its text",
        edited(BASE, (RETURN_UNCLOSED, 'return None, ""')),
        ["prefilled_block_that_never_closes", "generated_block_that_never_closes"]),
    "unclosed_block_read_as_the_answer": Mistake(
        "returns an unclosed block's text as the answer instead of as the reasoning",
        edited(BASE, (RETURN_UNCLOSED, "return None, text.strip()")),
        ["prefilled_block_that_never_closes", "generated_block_that_never_closes"]),
    # the block opens at the first <think> anywhere
    "think_found_anywhere": Mistake(
        "opens the block at the first <think> anywhere, not only at the start of the completion",
        edited(BASE, ("""            text = completion.lstrip()
            if not text.startswith("<think>"):
                return None, completion.strip()
            text = text[len("<think>"):]""", """            at = completion.find("<think>")
            if at < 0:
                return None, completion.strip()
            text = completion[at + len("<think>"):]""")),
        ["generated_direct_answers"]),
    "whitespace_before_think_refused": Mistake(
        "does not allow whitespace before a generated <think>",
        edited(BASE, ("text = completion.lstrip()", "text = completion")),
        ["generated_single_block"]),
    # a </think> alone taken as the end of a block in a generated completion
    "close_without_open_is_a_block": Mistake(
        "reads a </think> without an opening <think> as the end of a block in a generated completion",
        edited(BASE, ("""            if not text.startswith("<think>"):
                return None, completion.strip()
            text = text[len("<think>"):]""", """            if text.startswith("<think>"):
                text = text[len("<think>"):]
            elif "</think>" not in text:
                return None, completion.strip()""")),
        ["generated_direct_answers"]),
}
