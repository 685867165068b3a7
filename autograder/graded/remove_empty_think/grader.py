"""The grader's side of `remove_empty_think` (notebook 13): how its hidden cases are drawn, the correct
versions that must earn full marks and the known mistakes that must lose them, each with the
sentence a student reads (`autograder.mistakes`). Never in a student kit or the grading sandbox,
which hold the folder's __init__.py only.

Hidden cases of `remove_empty_think(targets, keep_prob, generator) -> list[str]` (notebook 13):
u = torch.rand(len(targets), generator=generator), one draw per target for every target; a target
that starts with the empty block `<think>\n\n</think>\n\n` keeps it iff u[i] < keep_prob, else
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

from autograder.graded._thinking_texts import draw_int, draw_problems
from autograder.mistakes import edited, Mistake


# ---------------------------------------------------------------- the hidden cases
# each error case and the phrase of the reference's `Raises:` section that states it (tests/test_contracts.py)
RAISES = {"error_keep_prob_negative": "keep_prob outside [0, 1]", "error_keep_prob_above_1": "keep_prob outside [0, 1]"}
EMPTY = "<think>\n\n</think>\n\n"


def make_inputs(gen: torch.Generator) -> list[tuple[str, dict]]:

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


# ---------------------------------------------------------------- the correct versions
BASE = """
    import torch
    EMPTY = "<think>\\n\\n</think>\\n\\n"
    def remove_empty_think(targets, keep_prob, generator):
        if keep_prob < 0 or keep_prob > 1:
            raise ValueError(f"keep_prob must be in [0, 1], got {keep_prob}")
        u = torch.rand(len(targets), generator=generator)
        out = []
        for i, t in enumerate(targets):
            if t.startswith(EMPTY) and not u[i] < keep_prob:
                t = t[len(EMPTY):]
            out.append(t)
        return out
"""

KEEP = "if t.startswith(EMPTY) and not u[i] < keep_prob:"

DRAW = "u = torch.rand(len(targets), generator=generator)"


CORRECT = {
    "loop_over_a_tensor": BASE,
    # a comprehension over Python floats, removeprefix
    "comprehension_removeprefix": """
        import torch
        def remove_empty_think(targets, keep_prob, generator):
            if not (0.0 <= keep_prob <= 1.0):
                raise ValueError("keep_prob outside [0, 1]")
            empty = "<think>\\n\\n</think>\\n\\n"
            draws = torch.rand(len(targets), generator=generator).tolist()
            return [t if (u < keep_prob or not t.startswith(empty)) else t.removeprefix(empty)
                    for t, u in zip(targets, draws)]
    """,
    # the keep decisions as a boolean tensor first, slicing by a constant length
    "boolean_mask_then_zip": """
        import torch
        def remove_empty_think(targets, keep_prob, generator):
            if keep_prob < 0.0:
                raise ValueError("keep_prob < 0")
            if keep_prob > 1.0:
                raise ValueError("keep_prob > 1")
            keep = torch.rand(len(targets), generator=generator) < keep_prob
            block = "<think>" + "\\n\\n" + "</think>" + "\\n\\n"
            result = []
            for target, k in zip(targets, keep.tolist()):
                result.append(target[len(block):] if target[:len(block)] == block and not k else target)
            return result
    """,
    # one draw per target in the loop, in order: the same numbers as one draw of len(targets)
    "a_draw_per_target_in_the_loop": """
        import torch
        def remove_empty_think(targets, keep_prob, generator):
            if not 0 <= keep_prob <= 1:
                raise ValueError(f"keep_prob={keep_prob} is not a probability")
            out = list(targets)
            for i in range(len(out)):
                u = torch.rand(1, generator=generator).item()
                if out[i].startswith("<think>\\n\\n</think>\\n\\n") and u >= keep_prob:
                    out[i] = out[i][len("<think>\\n\\n</think>\\n\\n"):]
            return out
    """,
}

# the fresh draws of the cases the many-draws check holds every version to (tests/test_graded.py; 40 by default)
DRAWS = 20


# ---------------------------------------------------------------- the known mistakes
MISTAKES = {
    # the block kept when the draw is at least keep_prob: keep_prob read as the removal probability
    "keep_prob_inverted": Mistake(
        "removes the block when the draw is below keep_prob, reading keep_prob as the probability of removal",
        edited(BASE, (KEEP, "if t.startswith(EMPTY) and u[i] < keep_prob:")),
        ["many_empty_blocks_keep_prob_quarter", "keep_prob_0_removes_every_empty_block",
         "keep_prob_1_keeps_every_empty_block"]),
    "one_minus_keep_prob": Mistake(
        "compares the draw with 1 - keep_prob instead of keep_prob",
        edited(BASE, (KEEP, "if t.startswith(EMPTY) and not u[i] < 1 - keep_prob:")),
        ["many_empty_blocks_keep_prob_quarter", "keep_prob_0_removes_every_empty_block"]),
    # a draw only for a target with an empty block: the others take no number
    "draws_only_for_empty_blocks": Mistake(
        "draws a number only for targets with an empty block instead of one per target",
        edited(BASE, (DRAW, ""), (KEEP, "if t.startswith(EMPTY) and not torch.rand(1, generator=generator).item() < keep_prob:")),
        ["empty_blocks_after_other_targets", "no_empty_block_nothing_changes"]),
    "le_instead_of_lt": Mistake(
        "keeps the block when the draw equals keep_prob (<= instead of <)",
        edited(BASE, (KEEP, "if t.startswith(EMPTY) and not u[i] <= keep_prob:")),
        ["keep_prob_equal_to_a_draw"]),
    "generator_ignored": Mistake(
        "draws from torch's global generator instead of the generator it is given",
        edited(BASE, (DRAW, "u = torch.rand(len(targets))")),
        ["mixed_keep_prob_half", "many_empty_blocks_keep_prob_quarter"]),
    "draws_in_float64": Mistake(
        "draws the numbers in float64 instead of torch.rand's default float32",
        edited(BASE, (DRAW, "u = torch.rand(len(targets), generator=generator, dtype=torch.float64)")),
        ["mixed_keep_prob_half", "many_empty_blocks_keep_prob_quarter"]),
    # any block with only whitespace inside, and the whitespace after it, taken as empty
    "near_empty_blocks_removed_by_a_regex": Mistake(
        "removes any block holding only whitespace, and the whitespace after it, not only the exact empty block",
        edited(BASE, ("    import torch\n", "    import re\n    import torch\n"),
                                                        ("""            if t.startswith(EMPTY) and not u[i] < keep_prob:
                t = t[len(EMPTY):]""", """            m = re.match(r"<think>\\s*</think>\\s*", t)
            if m and not u[i] < keep_prob:
                t = t[m.end():]""")),
        ["near_empty_blocks_and_blocks_elsewhere_unchanged",
         "what_follows_the_block_kept_as_it_is"]),
    "what_follows_stripped": Mistake(
        "strips the whitespace after the removed block",
        edited(BASE, ("t = t[len(EMPTY):]", "t = t[len(EMPTY):].lstrip()")),
        ["what_follows_the_block_kept_as_it_is"]),
    # str.replace: a block removed wherever it stands, and every copy of it
    "removed_wherever_it_stands": Mistake(
        "removes the empty block wherever it stands, every copy of it, instead of only at the start",
        edited(BASE, (KEEP, "if EMPTY in t and not u[i] < keep_prob:"),
                                              ("t = t[len(EMPTY):]", 't = t.replace(EMPTY, "")')),
        ["near_empty_blocks_and_blocks_elsewhere_unchanged",
         "what_follows_the_block_kept_as_it_is"]),
    "leading_whitespace_ignored": Mistake(
        "removes an empty block that follows leading whitespace, where only a block at the very start counts",
        edited(BASE, (KEEP, "if t.lstrip().startswith(EMPTY) and not u[i] < keep_prob:"),
                                              ("t = t[len(EMPTY):]", "t = t.lstrip()[len(EMPTY):]")),
        ["near_empty_blocks_and_blocks_elsewhere_unchanged"]),
    # a while loop: every empty block at the start removed
    "every_leading_block_removed": Mistake(
        "removes every empty block at the start instead of the first one only",
        edited(BASE, ("""                t = t[len(EMPTY):]""", """                while t.startswith(EMPTY):
                    t = t[len(EMPTY):]""")),
        ["what_follows_the_block_kept_as_it_is"]),
    "keep_prob_not_checked": Mistake(
        "accepts keep_prob outside [0, 1] instead of raising ValueError",
        edited(BASE, ("""        if keep_prob < 0 or keep_prob > 1:
            raise ValueError(f"keep_prob must be in [0, 1], got {keep_prob}")
""", "")),
        ["error_keep_prob_negative", "error_keep_prob_above_1"]),
}
