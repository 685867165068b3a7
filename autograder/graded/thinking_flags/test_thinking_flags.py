"""thinking_flags (notebook 13): the reference's contract. Its correct versions and known mistakes are
in grader.py (tests/test_graded.py runs them through the judge).
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, strategies as st

from course_lib import thinking_flags
from tests.helpers import PROPERTY_SETTINGS, seeds


# ---------------------------------------------------------------- the reference
@PROPERTY_SETTINGS
@given(st.integers(0, 50), st.integers(0, 64), seeds)
def test_reference_thinks_iff_the_draw_is_below_the_ratio(n, k, seed):
    u = torch.rand(n, generator=torch.Generator().manual_seed(seed))
    generator = torch.Generator().manual_seed(seed)
    flags = thinking_flags(n, k / 64, generator)
    assert flags == [x < k / 64 for x in u.tolist()]
    assert all(type(f) is bool for f in flags)
    after = torch.Generator().manual_seed(seed)
    torch.rand(n, generator=after)
    assert torch.equal(torch.rand(2, generator=generator), torch.rand(2, generator=after))


def test_reference_ratio_is_the_share_that_thinks():
    assert thinking_flags(100, 0.0, torch.Generator().manual_seed(0)) == [False] * 100
    assert thinking_flags(100, 1.0, torch.Generator().manual_seed(0)) == [True] * 100
    share = sum(thinking_flags(5000, 0.7, torch.Generator().manual_seed(1))) / 5000
    assert abs(share - 0.7) < 0.03


@pytest.mark.parametrize("ratio", [-0.5, 1.5, 50, float("nan")])
def test_reference_errors(ratio):
    with pytest.raises(ValueError, match="thinking_ratio"):
        thinking_flags(4, ratio, torch.Generator().manual_seed(0))
