"""Hidden cases of `thinking_format_reward(completion, prefilled) -> float` (notebook 13): 1.0 when the
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
"""

from __future__ import annotations

import torch

GRADED = "thinking_format_reward"
TRIPWIRE = ["thinking_format_reward", "split_reasoning"]


def make_inputs(gen: torch.Generator) -> list[tuple[str, dict]]:
    from ._thinking_texts import completions_case as case
    from ._thinking_texts import draw_completion_parts

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


def call(fn, inputs: dict) -> dict:
    return {"rewards": [fn(str(c), bool(p)) for c, p in zip(inputs["completions"], inputs["prefilled"])]}
