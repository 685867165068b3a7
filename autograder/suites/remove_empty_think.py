"""Hidden cases of `remove_empty_think(targets, keep_prob, generator) -> list[str]` (notebook 13):
u = torch.rand(len(targets), generator=generator), one draw per target for every target; a target
that starts with the empty block `<think>\\n\\n</think>\\n\\n` keeps it iff u[i] < keep_prob, else
the block (19 characters) is removed; every other target is returned unchanged.

Targets are SFT replies to arithmetic questions: direct answers behind the empty block, worked
reasoning in a block, bare answers, near-empty blocks written otherwise. Each case seeds a fresh
generator; keep_prob is a multiple of 1/64 (exact in float32 and float64) or, in
`keep_prob_equal_to_a_draw`, one of the case's draws itself. Outputs are exact: {"targets"} and
{"next_draws"}, the generator's next 3 draws after the call, which show how many numbers the
function drew (they must be len(targets)). Error cases must raise ValueError (or a subclass):
{"raises": "ValueError"}, "other" (another exception) or None.

What the cases are built to catch: the keep probability inverted (or taken as 1 - keep_prob),
draws made for the targets with an empty block only (`empty_blocks_after_other_targets`,
`no_empty_block_nothing_changes`), `<=` instead of `<` (`keep_prob_equal_to_a_draw`), the
generator ignored or draws in another dtype, a block removed wherever it stands or after leading
whitespace, near-empty blocks (`<think></think>`, one newline less) taken as empty, what follows
the block stripped, a loop that removes every empty block at the start (one is removed: the
block twice in a row), and keep_prob outside [0, 1].
"""

from __future__ import annotations

import torch

GRADED = "remove_empty_think"
# each error case and the phrase of the reference's `Raises:` section that states it (tests/test_contracts.py)
RAISES = {"error_keep_prob_negative": "keep_prob outside [0, 1]", "error_keep_prob_above_1": "keep_prob outside [0, 1]"}
EMPTY = "<think>\n\n</think>\n\n"


def make_inputs(gen: torch.Generator) -> list[tuple[str, dict]]:
    from ._thinking_texts import draw_int, draw_problems

    probs = draw_problems(gen, 12)
    direct = [f"{EMPTY}The answer is {p['answer']}." for p in probs]
    thought = [f"<think>\n{p['reasoning']}\n</think>\n\nThe answer is {p['answer']}." for p in probs]
    bare = [f"It is {p['answer']}." for p in probs]

    def seed():
        return draw_int(gen, 0, 2**31 - 1)

    def case(targets, keep_prob, expect_error=False):
        return {"targets": targets, "keep_prob": keep_prob, "seed": seed(), "expect_error": expect_error}

    def sixty_fourth(low, high):
        return draw_int(gen, low, high) / 64

    tie_seed = seed()
    tie_draws = torch.rand(8, generator=torch.Generator().manual_seed(tie_seed))
    tie = {"targets": direct[:8], "keep_prob": float(tie_draws[draw_int(gen, 0, 8)]), "seed": tie_seed,
           "expect_error": False}
    mixed = [t for triple in zip(direct, thought, bare) for t in triple]
    a = probs[0]["answer"]
    near_empty = [f"<think>\n</think>\n\n{a}", f"<think>\n\n</think>\n{a}", f"<think></think>{a}",
                  f"<think>\n\n</think>{a}", f" {EMPTY}{a}", f"\n{EMPTY}{a}", f"{a} {EMPTY}", f"<think>\n \n</think>\n\n{a}"]
    after_block = [f"{EMPTY}\n  {a}", EMPTY, f"{EMPTY}{EMPTY}{a}", f"{EMPTY} {a} ", f"{EMPTY}{thought[1]}"]
    return [
        ("mixed_keep_prob_half", case(mixed[:18], 0.5)),
        ("mixed_keep_prob_drawn", case(mixed, sixty_fourth(8, 57))),
        ("many_empty_blocks_keep_prob_quarter", case(direct * 3, 0.25)),
        ("many_empty_blocks_keep_prob_drawn_high", case(direct * 2 + bare, sixty_fourth(44, 60))),
        ("keep_prob_0_removes_every_empty_block", case(mixed[:12], 0.0)),
        ("keep_prob_1_keeps_every_empty_block", case(mixed[:12], 1.0)),
        ("keep_prob_int_0_and_1", case(direct[:4], 0)),
        ("keep_prob_equal_to_a_draw", tie),
        ("no_empty_block_nothing_changes", case(thought[:6] + bare[:6], 0.5)),
        ("empty_blocks_after_other_targets", case(thought[:5] + bare[:5] + direct[:10], sixty_fourth(16, 48))),
        ("near_empty_blocks_and_blocks_elsewhere_unchanged", case(near_empty + direct[:2], 0.0)),
        ("what_follows_the_block_kept_as_it_is", case(after_block, 0.0)),
        ("no_targets", case([], 0.5)),
        ("error_keep_prob_negative", case(direct[:3], -sixty_fourth(1, 64), expect_error=True)),
        ("error_keep_prob_above_1", case(direct[:3], 1 + sixty_fourth(1, 64), expect_error=True)),
    ]


def call(fn, inputs: dict) -> dict:
    generator = torch.Generator().manual_seed(inputs["seed"])
    targets = list(inputs["targets"])
    if inputs["expect_error"]:
        try:
            fn(targets, inputs["keep_prob"], generator)
        except Exception as e:  # noqa: BLE001 - which exception is the output
            return {"raises": "ValueError" if isinstance(e, ValueError) else "other"}
        return {"raises": None}
    out = fn(targets, inputs["keep_prob"], generator)
    return {"targets": out, "next_draws": torch.rand(3, generator=generator)}
