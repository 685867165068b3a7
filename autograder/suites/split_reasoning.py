"""Hidden cases of `split_reasoning(completion, prefilled) -> (reasoning, answer)` (notebook 13).

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

GRADED = "split_reasoning"


def make_inputs(gen: torch.Generator) -> list[tuple[str, dict]]:
    from ._thinking_texts import completions_case as case
    from ._thinking_texts import draw_completion_parts

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


def call(fn, inputs: dict) -> dict:
    return {"splits": [fn(str(c), bool(p)) for c, p in zip(inputs["completions"], inputs["prefilled"])]}
