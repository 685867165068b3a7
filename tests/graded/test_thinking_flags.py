"""thinking_flags (notebook 13): the reference's contract, correct versions that earn full marks
through the real judge, and realistic mistakes that lose them (CONTRIBUTING.md, "Adding a graded
function")."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from autograder.mistakes.thinking_flags import BASE
from course_lib import thinking_flags
from tests.helpers import PROPERTY_SETTINGS, corpus_tests, many_draws_test, seeds

SUITE = "thinking_flags"


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


CORRECT = {
    "vectorised_tolist": BASE,
    # a comprehension over Python floats
    "comprehension_over_floats": """
        import torch
        def thinking_flags(n, thinking_ratio, generator):
            if thinking_ratio < 0 or thinking_ratio > 1:
                raise ValueError("thinking_ratio outside [0, 1]")
            return [x < thinking_ratio for x in torch.rand(n, generator=generator).tolist()]
    """,
    # a loop of single draws, bool() of each comparison
    "a_draw_per_prompt": """
        import torch
        def thinking_flags(n, thinking_ratio, generator):
            if not (0.0 <= float(thinking_ratio) <= 1.0):
                raise ValueError(f"bad thinking_ratio {thinking_ratio}")
            flags = []
            for _ in range(n):
                flags.append(bool(torch.rand(1, generator=generator)[0] < thinking_ratio))
            return flags
    """,
    # the complement: a direct answer iff u >= thinking_ratio
    "not_of_direct": """
        import torch
        def thinking_flags(n, thinking_ratio, generator):
            if thinking_ratio < 0:
                raise ValueError("thinking_ratio < 0")
            if thinking_ratio > 1:
                raise ValueError("thinking_ratio > 1")
            direct = torch.rand(n, generator=generator) >= thinking_ratio
            return [not bool(d) for d in direct]
    """,
}


test_correct_version_earns_full_marks, test_mistake_loses_its_points = corpus_tests(SUITE, CORRECT)
test_each_version_holds_on_many_draws = many_draws_test(SUITE, CORRECT, draws=20)
