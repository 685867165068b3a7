"""remove_empty_think (notebook 13): the reference's contract. Its correct versions and known mistakes
are in grader.py (tests/test_graded.py runs them through the judge).
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, strategies as st

from course_lib import remove_empty_think
from tests.helpers import PROPERTY_SETTINGS, seeds


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
