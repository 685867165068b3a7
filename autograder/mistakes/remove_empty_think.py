"""The known mistakes of `remove_empty_think` (notebook 13): the catalogue `autograder.mistakes` describes."""

from __future__ import annotations

from autograder.mistakes import Mistake, edited


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
