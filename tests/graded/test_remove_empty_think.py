"""remove_empty_think (notebook 13): the reference's contract, correct versions that earn full marks
through the real judge, and realistic mistakes that lose them (CONTRIBUTING.md, "Adding a graded
function")."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from course_lib import remove_empty_think
from tests.helpers import PROPERTY_SETTINGS, corpus_tests, edited, many_draws_test, seeds

SUITE = "remove_empty_think"
EMPTY = "<think>\n\n</think>\n\n"
targets_st = st.lists(st.sampled_from([EMPTY + "4", EMPTY, "<think>\n2 + 2\n</think>\n\n4", "4", " " + EMPTY + "4",
                                       "<think></think>4", EMPTY + EMPTY + "4"]), max_size=12)


# ---------------------------------------------------------------- the reference
@PROPERTY_SETTINGS
@given(targets_st, st.integers(0, 64), seeds)
def test_reference_keeps_an_empty_block_iff_its_draw_is_below_keep_prob(targets, k, seed):
    keep_prob = k / 64
    u = torch.rand(len(targets), generator=torch.Generator().manual_seed(seed))
    generator = torch.Generator().manual_seed(seed)
    out = remove_empty_think(list(targets), keep_prob, generator)
    expected = [t[len(EMPTY):] if t.startswith(EMPTY) and u[i].item() >= keep_prob else t for i, t in enumerate(targets)]
    assert out == expected
    # one draw per target, whatever it holds
    after = torch.Generator().manual_seed(seed)
    torch.rand(len(targets), generator=after)
    assert torch.equal(torch.rand(2, generator=generator), torch.rand(2, generator=after))


def test_reference_keep_prob_0_and_1_and_the_share_kept():
    targets = [EMPTY + "4"] * 4000
    assert remove_empty_think(targets, 0.0, torch.Generator().manual_seed(0)) == ["4"] * 4000
    assert remove_empty_think(targets, 1.0, torch.Generator().manual_seed(0)) == targets
    kept = sum(t.startswith(EMPTY) for t in remove_empty_think(targets, 0.3, torch.Generator().manual_seed(1)))
    assert abs(kept / 4000 - 0.3) < 0.03


@pytest.mark.parametrize("keep_prob", [-0.01, 1.01, float("nan")])
def test_reference_errors(keep_prob):
    with pytest.raises(ValueError, match="keep_prob"):
        remove_empty_think([EMPTY + "4"], keep_prob, torch.Generator().manual_seed(0))


# ---------------------------------------------------------------- correct versions and mistakes
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

KEEP = "if t.startswith(EMPTY) and not u[i] < keep_prob:"
DRAW = "u = torch.rand(len(targets), generator=generator)"
MISTAKES = {
    # the block kept when the draw is at least keep_prob: keep_prob read as the removal probability
    "keep_prob_inverted": (edited(BASE, (KEEP, "if t.startswith(EMPTY) and u[i] < keep_prob:")),
                           ["many_empty_blocks_keep_prob_quarter", "keep_prob_0_removes_every_empty_block",
                            "keep_prob_1_keeps_every_empty_block"]),
    "one_minus_keep_prob": (edited(BASE, (KEEP, "if t.startswith(EMPTY) and not u[i] < 1 - keep_prob:")),
                            ["many_empty_blocks_keep_prob_quarter", "keep_prob_0_removes_every_empty_block"]),
    # a draw only for a target with an empty block: the others take no number
    "draws_only_for_empty_blocks": (edited(BASE, (DRAW, ""), (KEEP, "if t.startswith(EMPTY) and not torch.rand(1, generator=generator).item() < keep_prob:")),
                                    ["empty_blocks_after_other_targets", "no_empty_block_nothing_changes"]),
    "le_instead_of_lt": (edited(BASE, (KEEP, "if t.startswith(EMPTY) and not u[i] <= keep_prob:")),
                         ["keep_prob_equal_to_a_draw"]),
    "generator_ignored": (edited(BASE, (DRAW, "u = torch.rand(len(targets))")),
                          ["mixed_keep_prob_half", "many_empty_blocks_keep_prob_quarter"]),
    "draws_in_float64": (edited(BASE, (DRAW, "u = torch.rand(len(targets), generator=generator, dtype=torch.float64)")),
                         ["mixed_keep_prob_half", "many_empty_blocks_keep_prob_quarter"]),
    # any block with only whitespace inside, and the whitespace after it, taken as empty
    "near_empty_blocks_removed_by_a_regex": (edited(BASE, ("    import torch\n", "    import re\n    import torch\n"),
                                                    ("""            if t.startswith(EMPTY) and not u[i] < keep_prob:
                t = t[len(EMPTY):]""", """            m = re.match(r"<think>\\s*</think>\\s*", t)
            if m and not u[i] < keep_prob:
                t = t[m.end():]""")),
                                             ["near_empty_blocks_and_blocks_elsewhere_unchanged",
                                              "what_follows_the_block_kept_as_it_is"]),
    "what_follows_stripped": (edited(BASE, ("t = t[len(EMPTY):]", "t = t[len(EMPTY):].lstrip()")),
                              ["what_follows_the_block_kept_as_it_is"]),
    # str.replace: a block removed wherever it stands, and every copy of it
    "removed_wherever_it_stands": (edited(BASE, (KEEP, "if EMPTY in t and not u[i] < keep_prob:"),
                                          ("t = t[len(EMPTY):]", 't = t.replace(EMPTY, "")')),
                                   ["near_empty_blocks_and_blocks_elsewhere_unchanged",
                                    "what_follows_the_block_kept_as_it_is"]),
    "leading_whitespace_ignored": (edited(BASE, (KEEP, "if t.lstrip().startswith(EMPTY) and not u[i] < keep_prob:"),
                                          ("t = t[len(EMPTY):]", "t = t.lstrip()[len(EMPTY):]")),
                                   ["near_empty_blocks_and_blocks_elsewhere_unchanged"]),
    # a while loop: every empty block at the start removed
    "every_leading_block_removed": (edited(BASE, ("""                t = t[len(EMPTY):]""", """                while t.startswith(EMPTY):
                    t = t[len(EMPTY):]""")), ["what_follows_the_block_kept_as_it_is"]),
    "keep_prob_not_checked": (edited(BASE, ("""        if keep_prob < 0 or keep_prob > 1:
            raise ValueError(f"keep_prob must be in [0, 1], got {keep_prob}")
""", "")), ["error_keep_prob_negative", "error_keep_prob_above_1"]),
}

test_correct_version_earns_full_marks, test_mistake_loses_its_points = corpus_tests(SUITE, CORRECT, MISTAKES)
test_each_version_holds_on_many_draws = many_draws_test(SUITE, CORRECT, MISTAKES, draws=20)
