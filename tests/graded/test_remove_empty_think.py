"""remove_empty_think (notebook 13): the reference's contract, correct versions that earn full marks
through the real judge, and realistic mistakes that lose them (CONTRIBUTING.md, "Adding a graded
function")."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from autograder.mistakes.remove_empty_think import BASE
from course_lib import remove_empty_think
from tests.helpers import PROPERTY_SETTINGS, corpus_tests, many_draws_test, seeds

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


test_correct_version_earns_full_marks, test_mistake_loses_its_points = corpus_tests(SUITE, CORRECT)
test_each_version_holds_on_many_draws = many_draws_test(SUITE, CORRECT, draws=20)
