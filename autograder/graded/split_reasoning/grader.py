"""The grader's side of `split_reasoning` (notebook 13): how its hidden cases are drawn, the correct
versions that must earn full marks and the known mistakes that must lose them, each with the
sentence a student reads (`autograder.mistakes`). Never in a student kit or the grading sandbox,
which hold the folder's __init__.py only.

Hidden cases of `split_reasoning(completion, prefilled) -> (reasoning, answer)` (notebook 13).

prefilled True: the block is open at the completion's start (the prompt ended with `<think>`);
False: it opens at a `<think>` that starts the completion after whitespace, and any other
completion is a direct answer, (None, completion.strip()). The block closes at the `</think>`
that matches its opening (nested `<think>` / `</think>` pairs counted); reasoning = inside,
stripped; answer = the rest, stripped; a block that never closes gives (the inside, stripped, "").

Completions: arithmetic reasoning and answers in every shape, in both modes. Outputs are exact:
{"splits"}, the (reasoning, answer) of each completion of the case, in order.

What the cases are built to catch: the answer cut at the first `</think>` of a nested block
(`nested_*`, a regex `(.*?)`), or at the last (`stray_close_in_the_answer`, a greedy `(.*)`);
the prefilled flag ignored or read the other way (`prefilled_*` against `generated_*`, and
`prefilled_completion_that_opens_again`: a second `<think>` is a nested block that never closes);
a `<think>` found anywhere in a direct answer, a `</think>` without its opening taken as a block,
whitespace before `<think>` refused; nothing stripped; an unclosed block read as (None, "") or as
an answer; a block closed with nothing after it (`empty_answers`), an empty block.
"""

from __future__ import annotations

import torch

from autograder.graded._thinking_texts import completions_case as case, draw_completion_parts
from autograder.mistakes import edited, Mistake


# ---------------------------------------------------------------- the hidden cases
def make_inputs(gen: torch.Generator) -> list[tuple[str, dict]]:

    r, a, k = draw_completion_parts(gen, 6)

    return [
        ("prefilled_single_block", case((f"{r[0]}\n</think>\n\n{a[0]}", True), (f" {r[1]} </think> {a[1]}", True),
                                        (f"\n</think>\n\n{a[2]}", True), (f"{r[3]}</think>{a[3]}", True))),
        ("generated_single_block", case((f"<think>\n{r[0]}\n</think>\n\n{a[0]}", False), (f"\n  <think>{r[1]}</think>{a[1]}", False),
                                        (f"<think></think>\n{a[2]}", False), (f"\t<think> {r[3]} </think>  {a[3]} \n", False))),
        ("generated_direct_answers", case((a[0], False), (f"  {a[1]}\n", False), (f"{a[2]} <think>{r[2]}</think> {k}", False),
                                          (f"{r[3]} </think> {a[3]}", False), (f"The <think> tag, then {a[4]}", False))),
        ("prefilled_block_that_never_closes", case((r[0], True), (f" {a[1]} \n", True), ("", True))),
        ("generated_block_that_never_closes", case((f"<think>\n{r[2]}", False), ("<think>", False), (f" <think> {a[3]}\n", False))),
        ("nested_block_prefilled", case((f"{r[0]} <think> {r[1]} </think> {k} </think> {a[0]}", True),
                                        (f"\n<think>\n{r[2]}\n</think>\n</think>\n\n{a[2]}", True))),
        ("nested_block_generated", case((f"<think>\n{r[1]}\n<think>\n{r[2]}\n</think>\n{k}\n</think>\n\n{a[1]}", False),
                                        (f" <think><think>{r[3]}</think></think>{a[3]}", False))),
        ("nested_twice_and_side_by_side", case((f"<think> {k} <think> {k + 1} <think> {r[4]} </think> {k + 2} </think> "
                                                f"{k + 3} </think> {a[4]}", False),
                                               (f"{k} <think> {r[5]} </think> <think> {k + 1} </think> {k + 2} </think> {a[5]}",
                                                True))),
        ("nested_block_that_never_closes", case((f"<think> {r[0]} <think> {k} </think> {a[0]}", False),
                                                (f"{r[1]} <think> {k} </think> {a[1]}", True))),
        ("prefilled_completion_that_opens_again", case((f"<think>\n{r[2]}\n</think>\n\n{a[2]}", True))),
        ("stray_close_in_the_answer", case((f"{r[3]} </think> {a[3]} </think> {k}", True),
                                           (f"<think>{r[4]}</think>\n{a[4]}\n</think>", False))),
        ("empty_answers", case((f"<think>{r[5]}</think>", False), (f"<think>\n{r[0]}\n</think>  \n ", False),
                               (f"{r[1]}</think>\n", True))),
    ]


# ---------------------------------------------------------------- the correct versions
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

# the fresh draws of the cases the many-draws check holds every version to (tests/test_graded.py; 40 by default)
DRAWS = 20


# ---------------------------------------------------------------- the known mistakes
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
